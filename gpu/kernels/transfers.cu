// Kernels for the Transfers experiment. extern "C" keeps the names unmangled for the driver API.
#include <stdint.h>

extern "C" {

// Zero-copy copy: src or dst may be mapped host memory, so every 16-byte load or store crosses PCIe.
// Grid-stride so a bounded grid covers any size; 16-byte accesses keep the link's packets full.
__global__ void copy_vec4(const uint4* __restrict__ src, uint4* __restrict__ dst, unsigned long long n_vec4)
{
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec4; i += stride) {
        dst[i] = src[i];
    }
}

}
