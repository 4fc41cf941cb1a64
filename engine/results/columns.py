"""The results files and the column registry: every column of both files declared once.

Two files per runs folder, both compatible with the fugue harness (docs/results.md):
``master_groups.csv`` (one row per group, i.e. per cell attempt) and
``master_individual.csv`` (one row per job). :data:`COLUMNS` declares each column of each
file once, as a :class:`Column` (name, file, kind, one line of documentation), in an
append-only order that starts with the harness's columns, whose names, order and meanings
never change. Everything else is derived from it: the two headers (:func:`header`,
:data:`GROUP_COLUMNS`, :data:`INDIVIDUAL_COLUMNS`; pinned byte for byte by
tests/unit/engine/define/test_golden_keys.py), the columns tables of docs/results.md
(:mod:`engine.results.columns_doc`; a test checks they are current), the analysis's
numeric/text typing (:func:`numeric_columns`, :func:`text_columns`) and the checks of row
keys (:func:`check_names`; :class:`engine.results.rows.GroupRow`, which an executor fills as
``ctx.group``, fails where an unknown name is set, naming the nearest column).

**Adding a column** is one change: a :class:`Column` at the end of :data:`_OURS` (then
``python -m engine.results.columns_doc`` rewrites docs/results.md's tables). Never reorder,
rename or remove one: files on disk are upgraded by name, and the headers are pinned.
:data:`GROUP_COLUMNS` and :data:`INDIVIDUAL_COLUMNS` are the headers at import; the code
that writes or reads the files asks :func:`header` when it does.

Torch-free; imports only :mod:`engine.errors`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from engine.errors import nearest

GROUPS_FILE = "master_groups.csv"
INDIVIDUAL_FILE = "master_individual.csv"
RESULT_FILES = (GROUPS_FILE, INDIVIDUAL_FILE)

#: Kinds of value. ``number``: an int or a float (the analysis reads it as a float, an empty
#: cell as NaN); ``text``; ``bool``: ``True``/``False``; ``json``: compact JSON. Every kind
#: but ``number`` stays text in the analysis.
NUMBER, TEXT, BOOL, JSON = "number", "text", "bool", "json"
KINDS = (NUMBER, TEXT, BOOL, JSON)


@dataclass(frozen=True)
class Column:
    """One column of one results file. A name in both files is declared once per file; its
    second declaration leaves ``kind`` and ``doc`` out: they are the first one's (a name
    means the same in both files)."""

    name: str
    file: str
    kind: str | None = None
    doc: str | None = None


G, I = GROUPS_FILE, INDIVIDUAL_FILE  # noqa: E741 - the declarations below read better

_HARNESS: tuple[Column, ...] = (
    # master_groups.csv as the harness writes it, in order
    Column("group_id", G, TEXT,
           "`<executor>_<8 hex>`, new for every attempt; joins job rows to their group"),
    Column("exp_id", G, TEXT, "experiment id (E01–E17, D_*, or a user's)"),
    Column("executor", G, TEXT, "executor slug (seq, mp, ray, unified_model)"),
    Column("compile", G, BOOL,
           "True when torch.compile actually ran (`compile_mode` says which mode)"),
    Column("mode", G, TEXT, "workload type: ensemble, cv, hpo, multi_model"),
    Column("size", G, TEXT, "the experiment's size label (small, medium, large, mixed)"),
    Column("K", G, NUMBER, "number of jobs in the group"),
    Column("max_parallel", G, NUMBER, "most jobs that ran at the same time (seq: 1)"),
    Column("num_workers", G, NUMBER,
           "DataLoader workers: always 0 (in-memory data path, docs/measurement.md)"),
    Column("scheduler", G, TEXT,
           "Ray Tune trial scheduler that ran (ray hpo cells); empty otherwise"),
    Column("features", G, TEXT,
           "unified_model extensions that actually ran, `vf:{0|1},s:{0|1},fl:{0|1}` (quoted: it "
           "contains commas); vf is 1 only if every bucket ran vectorised (eager_buckets)"),
    Column("T_group", G, NUMBER, "group makespan, s (docs/measurement.md, Times)"),
    Column("total_samples", G, NUMBER, "samples actually trained (full batches only), count"),
    Column("throughput_group", G, NUMBER, "total_samples ÷ T_group, samples/s"),
    Column("energy_group", G, NUMBER,
           "GPU energy over the group window, J; empty when not measured (see energy_method)"),
    Column("gpu_util_mean", G, NUMBER,
           "mean NVML utilisation (time a kernel was running), %; empty when not measured"),
    Column("gpu_util_max", G, NUMBER, "max NVML utilisation, %; empty when not measured"),
    Column("vram_peak_mb", G, NUMBER, "peak device memory used, MiB; empty when not measured"),
    Column("timestamp", G, TEXT, "end of the group, local time `YYYYmmdd_HHMMSS`"),
    Column("gpu_name", G, TEXT, "GPU name; empty on CPU"),
    Column("torch_version", G, TEXT, "torch version of the cell process"),
    Column("cuda_version", G, TEXT, "CUDA runtime torch was built with"),
    Column("nv_driver_version", G, TEXT, "NVIDIA driver version"),
    Column("gpu_compute_mode", G, TEXT,
           "NVML compute mode (DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED)"),
    Column("gpu_vram_total_mb", G, NUMBER, "total device memory, MiB"),
    Column("cpu_model", G, TEXT, "CPU model name"),
    Column("cpu_cores", G, NUMBER, "logical CPU count"),
    # master_individual.csv as the harness writes it, in order
    Column("group_id", I),
    Column("job_id", I, TEXT,
           "job id: `{exp}_ens_s{i}`, `{exp}_fold{i}`, `{exp}_t{i}`, `{exp}_m{i}_{model}`"),
    Column("exp_id", I),
    Column("dataset", I, TEXT, "dataset name"),
    Column("model", I, TEXT, "model name"),
    Column("executor", I),
    Column("compile", I),
    Column("num_workers", I),
    Column("total_time_s", I, NUMBER,
           "job wall time from model build to the end of its last validation, s"),
    Column("total_samples", I),
    Column("throughput_sps", I, NUMBER, "total_samples ÷ total_time_s, samples/s"),
    Column("gpu_util_mean", I),
    Column("gpu_util_max", I),
    Column("vram_peak_mb", I),
    Column("energy_j", I, NUMBER,
           "the job's GPU energy, J; empty when jobs share the device at once or energy was not "
           "measured"),
    Column("early_stopped", I, BOOL, "True when a scheduler stopped the trial early"),
    Column("epochs_run", I, NUMBER, "epochs actually trained"),
    Column("gpu_name", I),
    Column("final_train_loss", I, NUMBER, "mean training loss over the last epoch"),
    Column("final_train_acc", I, NUMBER,
           "accuracy (R² for regression) over the last epoch's training batches"),
    Column("final_val_loss", I, NUMBER, "validation loss after the last epoch"),
    Column("final_val_acc", I, NUMBER,
           "validation accuracy (R² for regression) after the last epoch"),
    Column("seed", I, NUMBER, "the job's seed (seed + i); in group rows the campaign seed"),
    Column("batch_size", I, NUMBER, "batch size"),
    Column("epochs", I, NUMBER, "epochs asked for"),
    Column("lr", I, NUMBER, "learning rate"),
    Column("amp", I, BOOL,
           "True when automatic mixed precision (autocast) actually ran: precision amp-fp16 or "
           "amp-bf16"),
)

_OURS: tuple[Column, ...] = (
    # ours in master_groups.csv
    Column("campaign_id", G, TEXT,
           "identifier of the campaign run (one campaign TOML run) that wrote the row"),
    Column("cell_key", G, TEXT,
           "hash of the cell's resolved configuration (one matrix point); resume matches on it"),
    Column("pass", G, NUMBER,
           "number of the pass (repeat of the whole matrix) the row belongs to"),
    Column("attempt", G, NUMBER,
           "attempt number of the cell within its pass (a retry increments it)"),
    Column("status", G, TEXT,
           "outcome: ok, failed, killed, or skipped (cannot run on this machine); only ok rows "
           "count as done on resume or in analysis"),
    Column("error", G, TEXT,
           "error message (last traceback line or watchdog reason) of a failed cell or job; "
           "empty when ok"),
    Column("setup_s", G, NUMBER,
           "seconds of executor setup outside the measured group window (MPS daemon, ray.init, "
           "actor start; see docs/measurement.md), s"),
    Column("data_load_s", G, NUMBER,
           "seconds to load the cell's datasets into host memory, once per cell process, before "
           "the group window, s"),
    Column("train_throughput_sps", G, NUMBER,
           "samples trained ÷ time in training steps only (no validation, no setup), samples/s"),
    Column("threads", G, NUMBER,
           "torch intra-op CPU threads per training process (torch.get_num_threads())"),
    Column("compile_mode", G, TEXT,
           "torch.compile mode that actually ran: off, or the mode (default, reduce-overhead, "
           "...)"),
    Column("compile_requested", G, TEXT,
           "compile setting the campaign asked for (off or a mode); may differ from compile_mode"),
    Column("amp", G),
    Column("amp_requested", G, BOOL,
           "True when the experiment or campaign asked for automatic mixed precision (the legacy "
           "amp flag, or precision_requested amp-fp16 or amp-bf16)"),
    Column("features_requested", G, TEXT,
           "unified_model flags asked for, vf:{0|1},s:{0|1},fl:{0|1}; the harness's features "
           "column holds what ran"),
    Column("features_reason", G, TEXT,
           "why the effective features differ from features_requested (e.g. streams off under "
           "CUDA graphs); empty if they match"),
    Column("scheduler_requested", G, TEXT,
           "Ray trial scheduler asked for (fifo, asha, median, hyperband); the harness's "
           "scheduler column holds the one used"),
    Column("energy_method", G, TEXT,
           "how the energy column was obtained: NVML total-energy counter, integrated power "
           "samples, or none when energy was not measured (the energy cell is then empty)"),
    Column("host", G, TEXT, "host name of the machine that ran the cell"),
    Column("python_version", G, TEXT, "Python version of the cell process (x.y.z)"),
    Column("fugue_tui_version", G, TEXT, "fugue-tui package version that wrote the row"),
    Column("fugue_tui_commit", G, TEXT,
           "git commit of the fugue-tui source tree; empty when not run from a git checkout"),
    Column("campaign_hash", G, TEXT, "sha256 of the campaign file's bytes, first 16 hex digits"),
    Column("param_count", G, NUMBER,
           "parameters of the job's model (job rows) or of all the group's models, count"),
    Column("precision", G, TEXT,
           "numeric precision training ran in: fp32, tf32, amp-fp16 (autocast + GradScaler), "
           "amp-bf16 (autocast) or bf16 (bfloat16 weights); precision_requested says what was "
           "asked"),
    Column("backend_flags", G, JSON,
           "torch backend settings that affect speed (cudnn benchmark, TF32, matmul precision), "
           "compact JSON"),
    Column("device", G, TEXT, "device under test (e.g. cuda:0, cpu)"),
    Column("seed", G),
    Column("passes", G, NUMBER, "number of passes the campaign asked for"),
    Column("plugins", G, TEXT,
           "plugin modules loaded in the cell (FUGUE_PLUGINS and entry points), comma-separated"),
    Column("host_load_start", G, NUMBER,
           "1-minute load average of the host when the group window opened (os.getloadavg); "
           "other work on the host makes timings incomparable"),
    Column("host_load_end", G, NUMBER,
           "1-minute load average of the host when the group window closed"),
    Column("cell_cpu_s", G, NUMBER,
           "CPU seconds (user + system) the cell process used during the group window; compare "
           "with T_group × threads to see whether it got the cores it asked for"),
    Column("rung", G, TEXT,
           "unified_model ablation rung (A, B, C, C+FL, D, D+FL; fugue-compat.md); empty "
           "otherwise"),
    Column("gpu_uuid", G, TEXT,
           "NVML UUID of the device under test (GPU-… or MIG-…); empty without a GPU"),
    Column("gpu_power_limit_w", G, NUMBER, "enforced power limit of the device (NVML), W"),
    Column("gpu_power_mean_w", G, NUMBER,
           "mean sampled board power over the group window (NVML), W"),
    Column("gpu_sm_clock_mean_mhz", G, NUMBER,
           "mean sampled SM clock over the group window (NVML), MHz"),
    Column("gpu_temp_max_c", G, NUMBER,
           "highest sampled GPU temperature over the group window (NVML), °C"),
    Column("gpu_metrics_missing", G, TEXT,
           "GPU metrics the device could not report, with NVML's reason (e.g. utilization: "
           "NotSupported); their columns stay empty"),
    Column("mps_present", G, BOOL,
           "True when an MPS control daemon was running for this device's clients during the "
           "cell (ours or another's)"),
    Column("mps_used", G, BOOL,
           "True when the cell's worker processes ran as clients of our MPS daemon (mp)"),
    Column("mps_thread_pct", G, NUMBER,
           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE given to each MPS client, floor(100 / concurrent "
           "clients), %"),
    Column("monitor_interval_s", G, NUMBER, "the monitor's sampling interval, s"),
    Column("monitor_samples", G, NUMBER,
           "number of monitor samples inside the group window, count"),
    Column("monitor_cpu_share", G, NUMBER,
           "CPU time the monitor's sampling loop used inside the group window (its cumulative "
           "CPU, sampled and interpolated at the window's ends) ÷ T_group: its observer cost, "
           "fraction of one core"),
    Column("cpu_util_mean", G, NUMBER,
           "mean CPU use of the cell's whole process tree over the group window, % of one core "
           "(200 = two cores busy)"),
    Column("cpu_util_max", G, NUMBER,
           "highest sampled CPU use of the cell's process tree, % of one core"),
    Column("rss_peak_mb", G, NUMBER,
           "peak resident memory of the cell's process tree (sum over its processes, highest "
           "sample, or the cell's own peak if higher), MiB"),
    Column("host_mem_available_min_mb", G, NUMBER,
           "lowest host memory available during the group window (the cell's cgroup limit less its "
           "usage where lower), MiB"),
    Column("cpu_energy_j", G, NUMBER,
           "CPU package energy over the group window (RAPL), J; empty where the host has no "
           "energy interface"),
    Column("cpu_energy_method", G, TEXT,
           "how cpu_energy_j was obtained (rapl), or none when not measured"),
    Column("torch_peak_allocated_mb", G, NUMBER,
           "torch.cuda.max_memory_allocated in the training process(es) (job: that job; group: "
           "highest over jobs or the stacked process), MiB; empty on CPU"),
    Column("torch_peak_reserved_mb", G, NUMBER,
           "torch.cuda.max_memory_reserved, as torch_peak_allocated_mb, MiB"),
    Column("compile_warmup_s", G, NUMBER,
           "wall time of the compile probe(s) on the first batch (the compilation): inside "
           "total_time_s and T_group, never in train_time_s (group: sum over jobs, or over "
           "buckets for unified_model), s"),
    Column("samples_file", G, TEXT,
           "monitor samples of the group (or the job's slice), relative to the runs folder; "
           "a killed cell's too, `.csv.partial` when its sampler never finished the file"),
    Column("executor_info", G, JSON,
           "what the executor decided or observed, compact JSON (e.g. worker pids, Ray "
           "resources, the unified model's plan)"),
    Column("config_key", G, TEXT,
           "hash of the cell's configuration without the pass (experiment, jobs, executor and "
           "options, compile, scheduler, rung, features, seed, threads): the analysis pools rows"
           " across passes and campaigns only within one"),
    Column("workload_key", G, TEXT,
           "hash of what all executors of the experiment share (experiment definition, jobs, "
           "seed, threads): a strategy's seq baseline must have the same one"),
    # ours in master_individual.csv
    Column("campaign_id", I),
    Column("cell_key", I),
    Column("pass", I),
    Column("attempt", I),
    Column("status", I),
    Column("error", I),
    Column("train_time_s", I, NUMBER, "sum of the job's epoch training-step phases, s"),
    Column("train_throughput_sps", I),
    Column("val_time_s", I, NUMBER, "sum of the job's validation passes, s"),
    Column("threads", I),
    Column("compile_mode", I),
    Column("amp_requested", I),
    Column("param_count", I),
    Column("precision", I),
    Column("energy_method", I),
    Column("gpu_metrics_method", I, TEXT,
           "how the job's GPU utilisation and VRAM columns were read (e.g. NVML for the device "
           "under test); empty when not measured"),
    Column("host", I),
    Column("samples_dropped", I, NUMBER,
           "tail samples skipped over all epochs (only full batches train), count"),
    Column("split", I, TEXT,
           "where validation data came from: test (dataset's test split), holdout or fold"),
    Column("stop_reason", I, TEXT,
           "why a trial stopped before its epoch budget (scheduler decision); else empty"),
    Column("worker_pid", I, TEXT,  # an identifier: never averaged, so not a number
           "process id of the process that trained the job"),
    Column("torch_peak_allocated_mb", I),
    Column("torch_peak_reserved_mb", I),
    Column("compile_warmup_s", I),
    Column("samples_file", I),
    Column("compile_reason", I, TEXT,
           "why the job trained eagerly although compile was asked for (its compile probe "
           "raised or disagreed with eager); empty when it compiled or compile was off"),
    Column("power_method", G, TEXT,
           "NVML power reading behind gpu_power_mean_w and a power_integral energy: instant "
           "(field NVML_FI_DEV_POWER_INSTANT) or average (nvmlDeviceGetPowerUsage, a 1-s "
           "average on Ampere and later); empty when the row uses no power reading"),
    Column("power_method", I),
    Column("window_rule", G, TEXT,
           "version of the rule saying which phases fall inside T_group (docs/measurement.md): "
           "2 = a strategy's job-independent runtime is setup_s, all per-job work is inside; "
           "empty in rows written before the column existed, which were measured under rule 1 "
           "(per-executor boundaries)"),
    Column("mp_start", G, TEXT,
           "how mp started its workers: forkserver (forked from a parent that imported torch "
           "and the engine in setup) or spawn (a fresh interpreter per job); empty for other "
           "executors"),
    Column("worker_start_s", I, NUMBER,
           "seconds from the cell's request for the job's worker to the worker ready to train "
           "(mp: the process start or fork, what it still imports, torch set-up, plugins, the "
           "job's data load and device copy); inside T_group; empty without a per-job worker"),
    Column("cell_start", G, TEXT,
           "how the cell's process began: zygote (forked from the runner's pre-warmed parent, "
           "which had imported torch) or spawn (a fresh interpreter); empty in older rows"),
    Column("tune_actors", G, TEXT,
           "ray hpo cells: reused (reuse_actors = true: trials run in actors started in "
           "setup and reset per trial) or fresh (a new process per trial, started inside "
           "T_group; also when the cell refused reuse for a model that moves shared state "
           "at every build: executor_info.reuse_refused); empty for other cells"),
    Column("precision_requested", G, TEXT,
           "precision the campaign, experiment or legacy amp flag asked for (fp32, tf32, "
           "amp-fp16, amp-bf16, bf16); `precision` is what ran"),
    Column("precision_requested", I),
    Column("precision_reason", G, TEXT,
           "why the precision that ran is not the requested one (e.g. tf32 on a CPU, the "
           "legacy amp flag on a CPU); empty when they agree"),
    Column("precision_reason", I),
    Column("amp_skipped_steps", I, NUMBER,
           "optimizer steps the GradScaler skipped (inf/NaN gradients) under amp-fp16, count; "
           "empty without a GradScaler"),
    Column("amp_skipped_steps", G),
    # issue 29: the rest of the measured stack, in every group row (also the rows the
    # runner writes for a cell killed or failed before it reported)
    Column("numpy_version", G, TEXT, "numpy version installed for the cell (distribution "
           "metadata)"),
    Column("sklearn_version", G, TEXT, "scikit-learn version installed for the cell"),
    Column("cudnn_version", G, TEXT,
           "cuDNN `major.minor.patch`: what torch loaded in a CUDA cell; elsewhere the "
           "installed nvidia-cudnn wheel's (what a CUDA cell would load); empty without one"),
    Column("ray_version", G, TEXT, "Ray version installed (whether or not the cell used it)"),
    Column("plugin_versions", G, JSON,
           "each loaded plugin's version, `{\"plugin\": \"1.2\"}` (null: it declares "
           "none); empty without plugins"),
    Column("experiments_file_hash", G, TEXT,
           "sha256 of the campaign's user experiments file's bytes, first 16 hex digits; "
           "empty without one (not part of campaign_hash)"),
    Column("trial_config", I, JSON,
           "hpo trials: the trial's configuration, each search_space axis (as written: lr, "
           "model_kwargs.hidden) with its value, the same under every executor (a pure "
           "function of the campaign seed and the trial index); empty for other jobs"),
    Column("trials_stopped", G, NUMBER,
           "hpo cells under an early-stopping scheduler: trials stopped before their epoch "
           "budget (each job row says when and why: early_stopped, stop_reason, epochs_run); "
           "empty under fifo and outside hpo"),
    Column("best_trial", G, TEXT,
           "hpo groups: the job id of the trial whose validation reached best_val_metric; "
           "empty outside hpo or when no trial validated"),
    Column("best_val_metric", G, NUMBER,
           "hpo groups: the best validation metric any trial reached (val_loss, lower is "
           "better; R² for regression, higher is better: executor_info.best_so_far.metric)"),
    Column("time_to_best_s", G, NUMBER,
           "hpo groups: seconds from the group window's start until some trial's validation "
           "came within 1 % (relative, engine.results.hpo_best.EPSILON) of best_val_metric; "
           "the best-so-far curve is in executor_info.best_so_far"),
    Column("max_parallel_resolved", G, NUMBER,
           "the most jobs the plan let run at once (max_parallel as written, as \"auto\" "
           "resolved it, or K); max_parallel is what was measured; empty for seq"),
    Column("max_parallel_method", G, TEXT,
           "how max_parallel_resolved was decided: user (a number written), profile (\"auto\" "
           "estimated from this machine's profiles), profile-share (\"auto\" estimated with "
           "one cell's share of the host's cores and RAM: a multi-device campaign) or all "
           "(absent, or \"auto\" without a profile); empty for seq"),
    Column("max_parallel_profile", G, TEXT,
           "the profiles (profile_id in <runs_dir>/profiles.csv, comma-separated) the "
           "\"auto\" estimate used; empty otherwise"),
    # issue 29: the measured stack in every job row too, the same values as its group
    # row's (a job file read alone - a parquet export, a jobs.json - still says what ran
    # it; joining on group_id remains the way to every other group column)
    Column("torch_version", I),
    Column("cuda_version", I),
    Column("numpy_version", I),
    Column("sklearn_version", I),
    Column("cudnn_version", I),
    Column("ray_version", I),
    Column("plugin_versions", I),
    Column("experiments_file_hash", I),
    Column("placement", G, TEXT,
           "multi-device campaigns (devices): the device the cell was placed on, \"device "
           "i/n ENTRY UUID\" (every executor of one experiment and pass on one device; "
           "docs/measurement.md); empty with one device"),
    Column("cpu_affinity", G, TEXT,
           "multi-device campaigns: the host cores the cell was pinned to (e.g. 0-3), its "
           "share of the host split between concurrent cells; empty: not pinned"),
    Column("host_concurrent_cells", G, NUMBER,
           "multi-device campaigns: the most cells that ran on this host at once while this "
           "cell ran, itself included; empty with one device (one cell at a time)"),
    # Packing (issue 27: mp's devices option, engine.executors.packing).
    Column("packed_devices", G, TEXT,
           "GPU UUIDs (comma-separated, placement order) mp packed the cell's jobs onto, job "
           "i on the (i mod n)-th; empty for a one-device cell"),
    Column("jobs_per_device", G, NUMBER,
           "with packed_devices: the most jobs allowed at once on one device (as written, "
           "else the most jobs any device had); empty otherwise"),
    Column("job_device", I, TEXT,
           "GPU UUID the job's worker was pinned to (CUDA_VISIBLE_DEVICES) in a packed cell; "
           "empty otherwise (the group's gpu_uuid)"),
    # Issue 30: who competed for the host during the group window (engine.measure.competitors)
    Column("competing_processes", G, JSON,
           "processes outside the cell's tree that used >= 10 % of a core during the group "
           "window, busiest first, at most 3: [{pid, name, cpu_pct}] (cpu_pct: % of one "
           "core over T_group); [] none; empty: not readable"),
    # A campaign on a Ray cluster (issue 28, engine.cluster).
    Column("node", G, TEXT,
           "campaigns on a Ray cluster (cluster): the node the cell ran on, its host name "
           "and a hash of its address (\"gpu-7 3f2a9c01\"); empty on the runner's own host"),
    # Issue 42: what the row promises about training what seq trains (docs/fidelity.md,
    # "A row's parity_contract"); an outcome, never part of a cell key.
    Column("parity_contract", G, TEXT,
           "exact (bit for bit what seq trains: by construction, or a unified_model bucket "
           "whose float32 one-step probe was bit-identical on this machine) or "
           "bound:<name>(<args>) (within that documented bound: pass_bound, rounding_bound, "
           "adam_bound, half_precision, compile_probe, accuracy_band; a group of several "
           "buckets: the weakest). seq (the reference), mp and ray (the same solo kernels) "
           "say exact by construction; empty for an executor the contract has no row for "
           "and in older rows"),
    # When the row was written as an instant (issue 43): `timestamp` stays the harness's
    # zone-less local form; not part of the cell key (docs/measurement.md).
    Column("time_utc", G, TEXT,
           "when the row was written, ISO 8601 in UTC (`2026-12-04T15:50:05+00:00`): the "
           "instant `timestamp` names in the writing host's local time; empty in older rows "
           "(then `timestamp` is read as the reading host's local time)"),
    Column("time_utc", I),
    # Issue 43: the time a cell's processes spent stopped (SIGSTOP), counted in T_group.
    Column("stopped_s", G, NUMBER,
           "seconds the cell's processes were seen stopped (SIGSTOP, a debugger) while it "
           "ran, by the runner, at 0.25 s resolution: counted in T_group; 0 none; empty: "
           "not tracked (no runner)"),
    # Issue 45: how many of a unified_model cell's buckets trained eagerly (an outcome, not
    # part of the cell key: `features` as ran says vf:0 then, the key hashes the request).
    Column("eager_buckets", G, TEXT,
           "unified_model: `n/m: <first reason>` when n of the cell's m buckets trained "
           "eagerly (a single member, or the verification sent it eager; then features says "
           "vf:0), `0/m` when every bucket ran vectorised; empty for executors without "
           "buckets and in older rows"),
    # Issue 46: where the cell's scheduler decisions are (engine.results.decisions); an
    # outcome, not part of the cell key.
    Column("decisions", G, TEXT,
           "hpo cells under a scheduler other than fifo: the cell attempt's rung decisions "
           "in arrival order (trial, rung, metric value, continue/promote/stop), a "
           "decisions.json relative to the runs folder (docs/results.md, \"decisions.json\"); "
           "empty when the cell decided nothing (fifo, not hpo) and in older rows"),
    # Issue 45: whether the job built from the plugin state a fresh process shows
    # (engine.train.isolation); an outcome, never part of a cell key.
    Column("job_isolation", I, TEXT,
           "ok when the plugin state the job's model was built from (its builder module's "
           "global values, its classes' attributes; shallow) equals what its process showed "
           "its first job, else `shared state changed: Net.counter` naming the first changed "
           "values (an earlier job in the same process changed them: docs/measurement.md, "
           "Jobs are independent); empty in older rows and for jobs that never built"),
    # Issue 46: the cores behind a speedup (mp and ray use several, seq one). A measured
    # outcome, not part of the cell key (docs/measurement.md).
    Column("cores_used", G, NUMBER,
           "mean CPU cores the cell's processes used over the group window: their CPU seconds "
           "(user + system; the cell, its session, Ray's re-parented processes) inside the "
           "window ÷ its seconds (engine.measure.cores); empty without a monitor, on a Ray "
           "cluster and in older rows"),
    # Issue 50: the trained models back. Outcomes of the hand-back after the group window,
    # never part of a cell key (docs/measurement.md).
    Column("weights_sha256", I, TEXT,
           "sha256 (64 hex) of the job's final parameters and buffers, the canonical digest "
           "of docs/fidelity.md (\"The weights digest\"), computed after the group window "
           "in the process that held the weights (Ray Tune trials: in the cell, from the "
           "weights each trial handed off as it ended); a trial stopped early: its weights "
           "as of its stop; empty for a failed job and in older rows"),
    Column("digest_s", G, NUMBER,
           "seconds the hand-back after the group window spent digesting every job's final "
           "weights (outside T_group); empty in older rows"),
    Column("save_s", G, NUMBER,
           "seconds the hand-back spent writing saved models (save_models true or best; "
           "outside T_group); empty when nothing was saved"),
    Column("save_status", G, TEXT,
           "`ok` when every model asked for was saved, `failed: <one line>` when a save "
           "failed (the measured rows stay valid); empty when save_models was false"),
    # Issue 51: jobs that arrive over time. A stream cell's figures (docs/measurement.md,
    # "Streams"); empty in every batch cell's rows and in older rows.
    Column("arrival_s", I, NUMBER,
           "stream cells: the job's arrival, s after the group window opened "
           "(engine.define.arrivals); empty in batch cells"),
    Column("admitted_s", I, NUMBER,
           "stream cells: when the job was admitted (its training began), s after the group "
           "window opened; empty in batch cells"),
    Column("completed_s", I, NUMBER,
           "stream cells: when the job ended, s after the group window opened; empty in "
           "batch cells"),
    Column("queue_delay_s", I, NUMBER,
           "stream cells: admitted_s − arrival_s, s; empty in batch cells"),
    Column("jct_s", I, NUMBER,
           "stream cells: job completion time, completed_s − arrival_s, s; empty for a "
           "failed job and in batch cells"),
    Column("stream_sha256", G, TEXT,
           "stream cells: sha256 of the stream served (engine.define.arrivals, the canonical "
           "serialisation); empty in batch cells"),
    Column("stream_jobs", G, NUMBER, "stream cells: jobs in the stream; empty in batch cells"),
    Column("jct_mean_s", G, NUMBER,
           "stream cells: mean job completion time over the completed jobs, s"),
    Column("jct_p50_s", G, NUMBER,
           "stream cells: median job completion time (linear interpolation), s"),
    Column("jct_p95_s", G, NUMBER,
           "stream cells: 95th percentile job completion time (linear interpolation), s"),
    Column("makespan_s", G, NUMBER,
           "stream cells: last completion − first arrival, s"),
    Column("busy_s", G, NUMBER,
           "stream cells: the busy period, the length of the union of the jobs' [arrival, "
           "completion] intervals (at least one job in the system), s"),
    Column("throughput_jps", G, NUMBER,
           "stream cells: completed jobs ÷ busy_s, jobs/s"),
    Column("arrival_rate_jps", G, NUMBER,
           "stream cells: the stream's arrival rate, jobs/s (poisson: its rate; a trace: "
           "(n − 1) ÷ (last − first arrival))"),
    Column("offered_load", G, NUMBER,
           "stream cells: arrival_rate_jps × the mean service time (completed − admitted) "
           "of its completed jobs under this strategy; per server, divide by max_parallel"),
    # Issue 52: unified_model's dynamic stacking in stream cells (docs/measurement.md,
    # "Streams"). An outcome, never part of a cell key.
    Column("joined_s", I, NUMBER,
           "stream cells under unified_model: when the job joined a running stack of its "
           "structure (its first stacked step follows), s after the group window opened; "
           "empty when it started a bucket of its own, under other executors and in batch "
           "cells"),
    # Issue 51 item 3: a stream's utilisation and energy (docs/measurement.md, "Streams").
    # Measured outcomes, never part of a cell key.
    Column("busy_cores_used", G, NUMBER,
           "stream cells: mean CPU cores the cell's processes used over the busy period only "
           "(the idle gaps between arrivals left out; cores_used's counter); empty without a "
           "monitor, when a busy interval is shorter than monitor_interval_s and in batch "
           "cells"),
    Column("energy_per_job_j", G, NUMBER,
           "stream cells: energy_group ÷ completed jobs, J (idle waits included); empty when "
           "not measured"),
    Column("cpu_energy_per_job_j", G, NUMBER,
           "stream cells: cpu_energy_j ÷ completed jobs, J (idle waits included); empty when "
           "not measured"),
    # New columns go here, at the end, in either file (then python -m
    # engine.results.columns_doc): never before, never renamed, never removed.
)


def _resolved(columns: Iterable[Column]) -> tuple[Column, ...]:
    """``columns`` with inherited kinds and docs filled in, checked: a known file and kind,
    each name once per file, one kind and one doc per name, every doc one line."""
    first: dict[str, Column] = {}
    seen: set[tuple[str, str]] = set()
    out = []
    for col in columns:
        if col.file not in RESULT_FILES:
            raise ValueError(f"column '{col.name}': unknown file '{col.file}'")
        if (col.file, col.name) in seen:
            raise ValueError(f"column '{col.name}' declared twice in {col.file}")
        seen.add((col.file, col.name))
        earlier = first.get(col.name)
        if earlier is not None:
            if col.kind not in (None, earlier.kind) or col.doc not in (None, earlier.doc):
                raise ValueError(f"column '{col.name}': declared again with another kind or "
                                 "doc (a name means the same in both files)")
            col = replace(col, kind=earlier.kind, doc=earlier.doc)
        if col.kind not in KINDS:
            raise ValueError(f"column '{col.name}': kind {col.kind!r}, expected one of {KINDS}")
        if not col.doc or "\n" in col.doc:
            raise ValueError(f"column '{col.name}': its doc must be one line")
        first.setdefault(col.name, col)
        out.append(col)
    return tuple(out)


#: The registry, append-only: the harness's columns, then ours.
COLUMNS: tuple[Column, ...] = _resolved(_HARNESS + _OURS)
del G, I


def header(file: str) -> tuple[str, ...]:
    """``file``'s columns in order: its CSV header (from the registry as it is now)."""
    return tuple(c.name for c in COLUMNS if c.file == file)


def numeric_columns(file: str) -> tuple[str, ...]:
    """``file``'s columns the analysis reads as numbers (kind ``number``)."""
    return tuple(c.name for c in COLUMNS if c.file == file and c.kind == NUMBER)


def text_columns(file: str) -> tuple[str, ...]:
    """``file``'s columns the analysis keeps as text (every other kind)."""
    return tuple(c.name for c in COLUMNS if c.file == file and c.kind != NUMBER)


GROUP_COLUMNS: tuple[str, ...] = header(GROUPS_FILE)
INDIVIDUAL_COLUMNS: tuple[str, ...] = header(INDIVIDUAL_FILE)
_N_HARNESS = len(_HARNESS)
HARNESS_GROUP_COLUMNS: tuple[str, ...] = tuple(
    c.name for c in COLUMNS[:_N_HARNESS] if c.file == GROUPS_FILE)
HARNESS_INDIVIDUAL_COLUMNS: tuple[str, ...] = tuple(
    c.name for c in COLUMNS[:_N_HARNESS] if c.file == INDIVIDUAL_FILE)
#: Our columns, after the harness's.
EXTRA_GROUP_COLUMNS: tuple[str, ...] = GROUP_COLUMNS[len(HARNESS_GROUP_COLUMNS):]
EXTRA_INDIVIDUAL_COLUMNS: tuple[str, ...] = INDIVIDUAL_COLUMNS[len(HARNESS_INDIVIDUAL_COLUMNS):]
#: One line per column of ours (both files): meaning and unit. An empty cell means "not
#: measured" or "does not apply", never zero.
COLUMN_DOCS: dict[str, str] = {c.name: c.doc for c in COLUMNS[_N_HARNESS:]}


# --------------------------------------------------------------------------- checking

class UnknownColumnError(KeyError):
    """A row key that is no column of its file (a programming error: one line)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def check_names(file: str, names: Iterable[str]) -> None:
    """Raise :class:`UnknownColumnError` at the first of ``names`` that is no column of
    ``file``, naming the nearest one."""
    known = header(file)
    valid = set(known)
    for name in names:
        if name not in valid:
            hint = nearest(str(name), known) or " (the columns: docs/results.md)"
            raise UnknownColumnError(f"unknown {file} column '{name}'{hint}")
