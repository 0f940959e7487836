// Worker self-checks: a trivial kernel whose output proves the context works, and a deliberate fault.
#include <stdint.h>

extern "C" {

__global__ void health_fill(uint32_t* out, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 3u * i + 1u;
}

// Writes through an address no allocation covers: an illegal-address fault that kills the context.
// Used only by the worker's self-test job, to prove that the worker is replaced and the app survives.
__global__ void fault_illegal_address(uint32_t* out)
{
    volatile uint32_t* bad = (volatile uint32_t*)((uintptr_t)out ^ (1ull << 46));
    bad[threadIdx.x] = 0xdeadbeefu;
}

}
