"""The results report: tables, terminal charts, figures, K sweeps and advice, time to best, JSON documents and exports."""
