"""The results files' names and columns, and one line of documentation per column of ours.

Two files per runs folder, both compatible with the fugue harness (fugue-compat.md, "CSV
outputs"): ``master_groups.csv`` (one row per group, i.e. per cell) and
``master_individual.csv`` (one row per job). Our columns come after the harness's, whose
names and meanings never change (both headers are pinned by tests/unit/test_golden_keys.py).

Torch-free; imports nothing.
"""

from __future__ import annotations

GROUPS_FILE = "master_groups.csv"
INDIVIDUAL_FILE = "master_individual.csv"
RESULT_FILES = (GROUPS_FILE, INDIVIDUAL_FILE)

#: ``master_individual.csv`` as the harness writes it, in order.
HARNESS_INDIVIDUAL_COLUMNS: tuple[str, ...] = (
    "group_id", "job_id", "exp_id", "dataset", "model", "executor", "compile", "num_workers",
    "total_time_s", "total_samples", "throughput_sps", "gpu_util_mean", "gpu_util_max",
    "vram_peak_mb", "energy_j", "early_stopped", "epochs_run", "gpu_name", "final_train_loss",
    "final_train_acc", "final_val_loss", "final_val_acc", "seed", "batch_size", "epochs", "lr",
    "amp",
)

#: ``master_groups.csv`` as the harness writes it, in order.
HARNESS_GROUP_COLUMNS: tuple[str, ...] = (
    "group_id", "exp_id", "executor", "compile", "mode", "size", "K", "max_parallel",
    "num_workers", "scheduler", "features", "T_group", "total_samples", "throughput_group",
    "energy_group", "gpu_util_mean", "gpu_util_max", "vram_peak_mb", "timestamp", "gpu_name",
    "torch_version", "cuda_version", "nv_driver_version", "gpu_compute_mode",
    "gpu_vram_total_mb", "cpu_model", "cpu_cores",
)

#: Our group columns, after the harness's.
EXTRA_GROUP_COLUMNS: tuple[str, ...] = (
    "campaign_id", "cell_key", "pass", "attempt", "status", "error", "setup_s", "data_load_s",
    "train_throughput_sps", "threads", "compile_mode", "compile_requested", "amp",
    "amp_requested", "features_requested", "features_reason", "scheduler_requested",
    "energy_method", "host", "python_version", "fugue_tui_version", "fugue_tui_commit",
    "campaign_hash", "param_count", "precision", "backend_flags", "device", "seed", "passes",
    "plugins", "host_load_start", "host_load_end", "cell_cpu_s", "rung", "gpu_uuid",
    "gpu_power_limit_w", "gpu_power_mean_w", "gpu_sm_clock_mean_mhz", "gpu_temp_max_c",
    "gpu_metrics_missing", "mps_present", "mps_used", "mps_thread_pct", "monitor_interval_s",
    "monitor_samples", "monitor_cpu_share", "cpu_util_mean", "cpu_util_max", "rss_peak_mb",
    "host_mem_available_min_mb", "cpu_energy_j", "cpu_energy_method",
    "torch_peak_allocated_mb", "torch_peak_reserved_mb", "compile_warmup_s", "samples_file",
    "executor_info", "config_key", "workload_key",
)

#: Our job columns, after the harness's.
EXTRA_INDIVIDUAL_COLUMNS: tuple[str, ...] = (
    "campaign_id", "cell_key", "pass", "attempt", "status", "error", "train_time_s",
    "train_throughput_sps", "val_time_s", "threads", "compile_mode", "amp_requested",
    "param_count", "precision", "energy_method", "gpu_metrics_method", "host",
    "samples_dropped", "split", "stop_reason", "worker_pid", "torch_peak_allocated_mb",
    "torch_peak_reserved_mb", "compile_warmup_s", "samples_file",
)

GROUP_COLUMNS: tuple[str, ...] = HARNESS_GROUP_COLUMNS + EXTRA_GROUP_COLUMNS
INDIVIDUAL_COLUMNS: tuple[str, ...] = HARNESS_INDIVIDUAL_COLUMNS + EXTRA_INDIVIDUAL_COLUMNS

#: One line per column of ours (both files): meaning and unit. An empty cell means "not
#: measured" or "does not apply", never zero.
COLUMN_DOCS: dict[str, str] = {
    "campaign_id": "identifier of the campaign run (one campaign TOML run) that wrote the row",
    "cell_key": ("hash of the cell's resolved configuration (one matrix point); resume matches on"
                 " it"),
    "pass": "number of the pass (repeat of the whole matrix) the row belongs to",
    "attempt": "attempt number of the cell within its pass (a retry increments it)",
    "status": ("outcome: ok, failed, killed, or skipped (cannot run on this machine); only ok "
               "rows count as done on resume or in analysis"),
    "error": ("error message (last traceback line or watchdog reason) of a failed cell or job; "
              "empty when ok"),
    "setup_s": ("seconds of executor setup outside the measured group window (MPS daemon, "
                "ray.init, actor start; see docs/measurement.md), s"),
    "data_load_s": ("seconds to load the cell's datasets into host memory, once per cell "
                    "process, before the group window, s"),
    "train_throughput_sps": ("samples trained ÷ time in training steps only (no validation, no "
                             "setup), samples/s"),
    "train_time_s": "sum of the job's epoch training-step phases, s",
    "val_time_s": "sum of the job's validation passes, s",
    "threads": "torch intra-op CPU threads per training process (torch.get_num_threads())",
    "compile_mode": ("torch.compile mode that actually ran: off, or the mode (default, "
                     "reduce-overhead, ...)"),
    "compile_requested": ("compile setting the campaign asked for (off or a mode); may differ "
                          "from compile_mode"),
    "amp": "True when automatic mixed precision actually ran (CUDA autocast fp16 + GradScaler)",
    "amp_requested": "True when the experiment or campaign asked for automatic mixed precision",
    "features_requested": ("unified_model flags asked for, vf:{0|1},s:{0|1},fl:{0|1}; the "
                           "harness's features column holds what ran"),
    "features_reason": ("why the effective features differ from features_requested (e.g. streams "
                        "off under CUDA graphs); empty if they match"),
    "scheduler_requested": ("Ray trial scheduler asked for (fifo, asha, median, hyperband); the "
                            "harness's scheduler column holds the one used"),
    "energy_method": ("how the energy column was obtained: NVML total-energy counter, integrated "
                      "power samples, or none when energy was not measured (the energy cell is "
                      "then empty)"),
    "gpu_metrics_method": ("how the job's GPU utilisation and VRAM columns were read (e.g. NVML "
                           "for the device under test); empty when not measured"),
    "host": "host name of the machine that ran the cell",
    "python_version": "Python version of the cell process (x.y.z)",
    "fugue_tui_version": "fugue-tui package version that wrote the row",
    "fugue_tui_commit": ("git commit of the fugue-tui source tree; empty when not run from a git "
                         "checkout"),
    "campaign_hash": "sha256 of the campaign file's bytes, first 16 hex digits",
    "param_count": "parameters of the job's model (job rows) or of all the group's models, count",
    "precision": "numeric precision training ran in: fp32, or amp-fp16 (autocast + GradScaler)",
    "backend_flags": ("torch backend settings that affect speed (cudnn benchmark, TF32, matmul "
                      "precision), compact JSON"),
    "device": "device under test (e.g. cuda:0, cpu)",
    "seed": "base seed of the group; job seeds derive from it",
    "passes": "number of passes the campaign asked for",
    "samples_dropped": "tail samples skipped over all epochs (only full batches train), count",
    "plugins": "plugin modules loaded in the cell (FUGUE_PLUGINS and entry points), comma-separated",
    "host_load_start": ("1-minute load average of the host when the group window opened "
                        "(os.getloadavg); other work on the host makes timings incomparable"),
    "host_load_end": "1-minute load average of the host when the group window closed",
    "cell_cpu_s": ("CPU seconds (user + system) the cell process used during the group window; "
                   "compare with T_group × threads to see whether it got the cores it asked for"),
    "split": "where validation data came from: test (dataset's test split), holdout or fold",
    "rung": "unified_model ablation rung (A, B, C, C+FL, D, D+FL; fugue-compat.md); empty otherwise",
    "gpu_uuid": "NVML UUID of the device under test (GPU-… or MIG-…); empty without a GPU",
    "gpu_power_limit_w": "enforced power limit of the device (NVML), W",
    "gpu_power_mean_w": "mean sampled board power over the group window (NVML), W",
    "gpu_sm_clock_mean_mhz": "mean sampled SM clock over the group window (NVML), MHz",
    "gpu_temp_max_c": "highest sampled GPU temperature over the group window (NVML), °C",
    "gpu_metrics_missing": ("GPU metrics the device could not report, with NVML's reason "
                            "(e.g. utilization: NotSupported); their columns stay empty"),
    "mps_present": ("True when an MPS control daemon was running for this device's clients "
                    "during the cell (ours or another's)"),
    "mps_used": "True when the cell's worker processes ran as clients of our MPS daemon (mp)",
    "mps_thread_pct": ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE given to each MPS client, "
                       "floor(100 / concurrent clients), %"),
    "monitor_interval_s": "the monitor's sampling interval, s",
    "monitor_samples": "number of monitor samples inside the group window, count",
    "monitor_cpu_share": ("CPU time the monitor's sampling loop used inside the group window "
                          "(its cumulative CPU, sampled and interpolated at the window's ends) "
                          "÷ T_group: its observer cost, fraction of one core"),
    "cpu_util_mean": ("mean CPU use of the cell's whole process tree over the group window, "
                      "% of one core (200 = two cores busy)"),
    "cpu_util_max": "highest sampled CPU use of the cell's process tree, % of one core",
    "rss_peak_mb": ("peak resident memory of the cell's process tree (sum over its processes, "
                    "highest sample, or the cell's own peak if higher), MiB"),
    "host_mem_available_min_mb": "lowest host memory available during the group window, MiB",
    "cpu_energy_j": ("CPU package energy over the group window (RAPL), J; empty where the host "
                     "has no energy interface"),
    "cpu_energy_method": "how cpu_energy_j was obtained (rapl), or none when not measured",
    "torch_peak_allocated_mb": ("torch.cuda.max_memory_allocated in the training process(es) "
                                "(job: that job; group: highest over jobs or the stacked "
                                "process), MiB; empty on CPU"),
    "torch_peak_reserved_mb": "torch.cuda.max_memory_reserved, as torch_peak_allocated_mb, MiB",
    "compile_warmup_s": ("time of the first compiled step(s), reported apart from training "
                         "(inside T_group), s"),
    "samples_file": "monitor samples of the group (or the job's slice), relative to the runs folder",
    "executor_info": ("what the executor decided or observed, compact JSON (e.g. worker pids, "
                      "Ray resources, the unified model's plan)"),
    "config_key": ("hash of the cell's configuration without the pass (experiment, jobs, "
                   "executor and options, compile, scheduler, rung, features, seed, threads): "
                   "the analysis pools rows across passes and campaigns only within one"),
    "workload_key": ("hash of what all executors of the experiment share (experiment "
                     "definition, jobs, seed, threads): a strategy's seq baseline must have the "
                     "same one"),
    "stop_reason": "why a trial stopped before its epoch budget (scheduler decision); else empty",
    "worker_pid": "process id of the process that trained the job",
}
