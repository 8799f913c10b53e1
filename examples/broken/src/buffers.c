/* Work buffers for the hand-written layers. Mistake (README.md): no alignment attribute and a size that
 * is not a multiple of 16, so the kernels' word and SIMD loads may start (or end) misaligned. */
#include <stdint.h>

int8_t head_scratch_buffer[300];
