/* A hand-written classifier head on top of the generated model: a fully connected layer, 10 -> 16.
 * Two mistakes (README.md): the bias is int8 (CMSIS-NN's s8 kernels read an int32 bias, scaled by
 * s_in * s_w[c]), and the output offset is the uint8 habit 128 (int8 zero points lie in [-128, 127]). */
#include "arm_nnfunctions.h"

static const int8_t head_weights[160] __attribute__((aligned(16))) = {1, -2, 3, -4};
static const int8_t head_bias[16] __attribute__((aligned(16))) = {12, -7, 3}; /* mistake: int8 bias */

int head_invoke(const int8_t *features, int8_t *scores)
{
    const cmsis_nn_context ctx = {.buf = 0, .size = 0};
    const cmsis_nn_head_params head_params = {
        .input_offset = 40,
        .filter_offset = 0,
        .output_offset = 128, /* mistake: a uint8 zero point */
        .activation = {.min = -128, .max = 127},
    };
    const cmsis_nn_per_tensor_quant_params quant = {.multiplier = 1518500250, .shift = -7};
    const cmsis_nn_dims input_dims = {.n = 1, .h = 1, .w = 1, .c = 10};
    const cmsis_nn_dims filter_dims = {.n = 10, .h = 1, .w = 1, .c = 16};
    const cmsis_nn_dims bias_dims = {.n = 1, .h = 1, .w = 1, .c = 16};
    const cmsis_nn_dims output_dims = {.n = 1, .h = 1, .w = 1, .c = 16};
    return arm_fully_connected_s8(&ctx, &head_params, &quant, &input_dims, features, &filter_dims,
                                  head_weights, &bias_dims, (const int32_t *)head_bias, &output_dims, scores);
}
