/* The example firmware: classify a few Fashion-MNIST test images with the generated int8 model and
 * print each image's class over semihosting (QEMU's stdout).
 *
 * src/model/ is written by `fixpoint generate` (model.h: model_init, model_input, model_invoke,
 * model_output and the input/output scale and zero point); test_images.h by examples/fashion/train.py. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "test_images.h"

#define CLASS_COUNT (MODEL_OUTPUT_BYTES / (int)sizeof(MODEL_OUTPUT_TYPE))

/* A pixel (0..255) as the model sees it, x / 255 in [0, 1], quantized: q = round(x / scale) + zero point. */
static MODEL_INPUT_TYPE quantize_pixel(uint8_t pixel)
{
    float q = rintf(((float)pixel / 255.0f) / MODEL_INPUT_SCALE) + (float)MODEL_INPUT_ZERO_POINT;
    if (q < -128.0f) {
        q = -128.0f;
    }
    if (q > 127.0f) {
        q = 127.0f;
    }
    return (MODEL_INPUT_TYPE)q;
}

static int arg_max(const MODEL_OUTPUT_TYPE *logits)
{
    int best = 0;
    for (int c = 1; c < CLASS_COUNT; c++) {
        if (logits[c] > logits[best]) {
            best = c;
        }
    }
    return best;
}

int main(void)
{
    int status = model_init();
    if (status != 0) {
        printf("model_init failed: %d\n", status);
        return 1;
    }
    int correct = 0;
    for (int i = 0; i < TEST_IMAGE_COUNT; i++) {
        MODEL_INPUT_TYPE *input = model_input(); /* the input shares the arena: write it every time */
        for (int p = 0; p < TEST_IMAGE_PIXELS; p++) {
            input[p] = quantize_pixel(test_images[i][p]);
        }
        status = model_invoke();
        if (status != 0) {
            printf("model_invoke failed in layer %d\n", status - 1);
            return 2;
        }
        int predicted = arg_max(model_output());
        int label = test_labels[i];
        correct += predicted == label;
        printf("image %d: class %d %-11s (label %d %s)%s\n", i, predicted, class_names[predicted], label,
               class_names[label], predicted == label ? "" : "  <- wrong");
    }
    printf("%d of %d correct\n", correct, TEST_IMAGE_COUNT);
    return 0;
}
