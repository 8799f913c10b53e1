/* An application that knows only model.h: it feeds the model real-valued inputs the way model.h says
 * (NHWC order, quantized with MODEL_INPUT_SCALE and MODEL_INPUT_ZERO_POINT) and prints, per case, the
 * bytes it wrote and the output bytes it read:
 *     IN <case> <hex bytes>
 *     OUT <case> <hex bytes>
 * The test writes app_inputs.c: app_case_count and app_inputs, real values already in the firmware's
 * layout (the test did the transposition model.h asks for). Nothing else of Fixpoint is included. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"

extern const unsigned app_case_count;
extern const float app_inputs[][MODEL_INPUT_ELEMENTS];

#define QMIN (sizeof(MODEL_INPUT_TYPE) == 1 ? -128L : -32768L)
#define QMAX (sizeof(MODEL_INPUT_TYPE) == 1 ? 127L : 32767L)

static MODEL_INPUT_TYPE quantize(float x)
{
    /* model.h: q = clamp(round(x / SCALE) + ZERO_POINT), halves away from zero (lroundf). */
    long q = lroundf(x / MODEL_INPUT_SCALE) + MODEL_INPUT_ZERO_POINT;
    return (MODEL_INPUT_TYPE)(q < QMIN ? QMIN : q > QMAX ? QMAX : q);
}

static void print_bytes(const char *tag, unsigned c, const void *data, size_t bytes)
{
    const uint8_t *p = (const uint8_t *)data;
    printf("%s %u ", tag, c);
    for (size_t i = 0; i < bytes; ++i) {
        printf("%02x", p[i]);
    }
    printf("\n");
}

int main(void)
{
    if (model_init() != 0) {
        printf("init failed\n");
        return 1;
    }
    for (unsigned c = 0; c < app_case_count; ++c) {
        MODEL_INPUT_TYPE *in = model_input();
        /* Loop over the documented dimensions: element (n, h, w, c) at ((n*H + h)*W + w)*C + ch. */
        for (int n = 0; n < MODEL_INPUT_BATCH; ++n) {
            for (int h = 0; h < MODEL_INPUT_HEIGHT; ++h) {
                for (int w = 0; w < MODEL_INPUT_WIDTH; ++w) {
                    for (int ch = 0; ch < MODEL_INPUT_CHANNELS; ++ch) {
                        int i = ((n * MODEL_INPUT_HEIGHT + h) * MODEL_INPUT_WIDTH + w) * MODEL_INPUT_CHANNELS + ch;
                        in[i] = quantize(app_inputs[c][i]);
                    }
                }
            }
        }
        print_bytes("IN", c, in, MODEL_INPUT_ELEMENTS * sizeof(MODEL_INPUT_TYPE));
        if (model_invoke() != 0) {
            printf("invoke failed\n");
            return 1;
        }
        print_bytes("OUT", c, model_output(), MODEL_OUTPUT_ELEMENTS * sizeof(MODEL_OUTPUT_TYPE));
    }
    printf("DONE\n");
    fflush(stdout);
    return 0;
}
