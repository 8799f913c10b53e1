/* The broken example's application: the generated model, then a hand-written classifier head. */
#include <stdint.h>

#include "model.h"

int head_invoke(const int8_t *features, int8_t *scores);

int main(void)
{
    static int8_t scores[16];
    if (model_init() != 0 || model_invoke() != 0) {
        return 1;
    }
    return head_invoke(model_output(), scores);
}
