"""Suspend and resume a process's CUDA state with the driver's checkpoint API, timed.

For each size: a target process fills SIZE GB on the GPU; this process locks and checkpoints it
(device memory moves to host memory and the GPU is released), checks nvidia-smi shows the memory
free, lets a second process use the GPU meanwhile, restores and unlocks, and asks the target to
check its values. Prints one JSON line per size, and `UNAVAILABLE <why>` when the driver lacks it.
"""
import ctypes
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STATES = {0: "running", 1: "locked", 2: "checkpointed", 3: "failed"}


def smi_used_mib():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def smi_apps():
    return subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory",
                           "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout


def main():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        print("UNAVAILABLE no libcuda:", error)
        return
    version = ctypes.c_int()
    cuda.cuDriverGetVersion(ctypes.byref(version))
    missing = [name for name in ("cuCheckpointProcessLock", "cuCheckpointProcessCheckpoint",
                                 "cuCheckpointProcessRestore", "cuCheckpointProcessUnlock",
                                 "cuCheckpointProcessGetState") if not hasattr(cuda, name)]
    print("DRIVER_API", version.value, "missing:", missing, flush=True)
    if missing:
        print("UNAVAILABLE driver lacks", missing)
        return
    print("cuInit", cuda.cuInit(0), flush=True)

    def call(name, pid):
        start = time.perf_counter()
        result = getattr(cuda, name)(ctypes.c_int(pid), None)
        return result, time.perf_counter() - start

    def state(pid):
        value = ctypes.c_int(-1)
        result = cuda.cuCheckpointProcessGetState(ctypes.c_int(pid), ctypes.byref(value))
        return STATES.get(value.value, value.value) if result == 0 else "error %d" % result

    sizes = [float(size) for size in sys.argv[1:]] or [1.0, 8.0, 32.0]
    for size in sizes:
        record = {"size_gb": size}
        target = subprocess.Popen([sys.executable, os.path.join(HERE, "checkpoint_target.py"), str(size)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            ready = target.stdout.readline().split()
            record["checksum_before"] = int(ready[1])
            pid = target.pid
            record["used_mib_before"] = smi_used_mib()
            record["state_before"] = state(pid)
            record["lock"] = call("cuCheckpointProcessLock", pid)
            record["checkpoint"] = call("cuCheckpointProcessCheckpoint", pid)
            record["state_suspended"] = state(pid)
            record["used_mib_suspended"] = smi_used_mib()
            record["apps_suspended"] = smi_apps()
            with open("/proc/%d/status" % pid) as status:
                record["target_vmrss_suspended"] = [l for l in status if l.startswith("VmRSS")][0].strip()
            other = subprocess.run([sys.executable, "-c",
                                    "import torch; a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); "
                                    "b=(a@a); torch.cuda.synchronize(); print(torch.cuda.get_device_name(), float(b.float().abs().mean()))"],
                                   capture_output=True, text=True)
            record["other_process_meanwhile"] = (other.returncode, other.stdout.strip(), other.stderr[-300:])
            record["restore"] = call("cuCheckpointProcessRestore", pid)
            record["unlock"] = call("cuCheckpointProcessUnlock", pid)
            record["state_after"] = state(pid)
            record["used_mib_after"] = smi_used_mib()
            target.stdin.write("CHECK\n")
            target.stdin.flush()
            checked = target.stdout.readline().split()
            record["checked"] = checked
            record["same_values"] = len(checked) == 3 and int(checked[1]) == record["checksum_before"]
        except Exception as error:  # report and go on with the next size
            record["error"] = repr(error)
        finally:
            try:
                target.stdin.write("EXIT\n")
                target.stdin.flush()
            except Exception:
                pass
            try:
                target.wait(timeout=60)
            except subprocess.TimeoutExpired:
                target.kill()
        print("CHECKPOINT", json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
