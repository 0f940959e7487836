// Timing helpers shared by every experiment (gpu/runtime.py StreamHold).

// nvbench's blocking kernel: holds a stream until the host has queued every launch of a sample, so the
// measured time is the GPU's, not Python's issue rate. ``flags`` is mapped host memory: the host writes
// flags[0] = 1 to release; if that never comes within ``timeout_ns`` the kernel gives up and sets flags[1],
// and the host refuses the sample with an error (a held GPU must never hang).
extern "C" __global__ void hold_stream(volatile int* flags, unsigned long long timeout_ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flags[0] == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {
            flags[1] = 1;
            return;
        }
    }
}
