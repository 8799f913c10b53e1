/* Prints what CMSIS-NN's *_get_buffer_size functions return, one line per request read from stdin.
 *
 * Request: <kind> <path> then 19 integers: input n h w c, filter n h w c, output n h w c, stride h w,
 * padding h w, dilation h w, ch_mult. <path> is none (the plain function: the host build is the pure-C
 * path), dsp or mve (the _dsp / _mve variants, compiled on every architecture since CMSIS-NN v7).
 * Test-only: tests/codegen/test_buffers.py compares quantcore.codegen.buffers with these numbers.
 */
#include <stdio.h>
#include <string.h>

#include "arm_nnfunctions.h"

typedef struct
{
    cmsis_nn_dims input, filter, output;
    cmsis_nn_tile stride, padding, dilation;
    int32_t ch_mult;
} request;

static cmsis_nn_conv_params conv_params(const request *r)
{
    cmsis_nn_conv_params p = {0};
    p.stride = r->stride;
    p.padding = r->padding;
    p.dilation = r->dilation;
    return p;
}

static cmsis_nn_dw_conv_params dw_params(const request *r)
{
    cmsis_nn_dw_conv_params p = {0};
    p.ch_mult = r->ch_mult;
    p.stride = r->stride;
    p.padding = r->padding;
    p.dilation = r->dilation;
    return p;
}

static cmsis_nn_transpose_conv_params transpose_params(const request *r)
{
    cmsis_nn_transpose_conv_params p = {0};
    p.stride = r->stride;
    p.padding = r->padding;
    p.dilation = r->dilation;
    return p;
}

#define PICK(path, plain, dsp, mve) (strcmp(path, "dsp") == 0 ? (dsp) : strcmp(path, "mve") == 0 ? (mve) : (plain))

static int size_of(const char *kind, const char *path, const request *r, int32_t *size)
{
    const cmsis_nn_conv_params cp = conv_params(r);
    const cmsis_nn_dw_conv_params dp = dw_params(r);
    const cmsis_nn_transpose_conv_params tp = transpose_params(r);
    const cmsis_nn_dims *i = &r->input, *f = &r->filter, *o = &r->output;
    if (strcmp(kind, "conv_s8") == 0)
        *size = PICK(path,
                     arm_convolve_wrapper_s8_get_buffer_size(&cp, i, f, o),
                     arm_convolve_wrapper_s8_get_buffer_size_dsp(&cp, i, f, o),
                     arm_convolve_wrapper_s8_get_buffer_size_mve(&cp, i, f, o));
    else if (strcmp(kind, "dw_s8") == 0)
        *size = PICK(path,
                     arm_depthwise_conv_wrapper_s8_get_buffer_size(&dp, i, f, o),
                     arm_depthwise_conv_wrapper_s8_get_buffer_size_dsp(&dp, i, f, o),
                     arm_depthwise_conv_wrapper_s8_get_buffer_size_mve(&dp, i, f, o));
    else if (strcmp(kind, "conv_s16") == 0)
        *size = PICK(path,
                     arm_convolve_wrapper_s16_get_buffer_size(&cp, i, f, o),
                     arm_convolve_wrapper_s16_get_buffer_size_dsp(&cp, i, f, o),
                     arm_convolve_wrapper_s16_get_buffer_size_mve(&cp, i, f, o));
    else if (strcmp(kind, "dw_s16") == 0)
        *size = PICK(path,
                     arm_depthwise_conv_wrapper_s16_get_buffer_size(&dp, i, f, o),
                     arm_depthwise_conv_wrapper_s16_get_buffer_size_dsp(&dp, i, f, o),
                     arm_depthwise_conv_wrapper_s16_get_buffer_size_mve(&dp, i, f, o));
    else if (strcmp(kind, "fc_s8") == 0)
        *size = PICK(path,
                     arm_fully_connected_s8_get_buffer_size(f),
                     arm_fully_connected_s8_get_buffer_size_dsp(f),
                     arm_fully_connected_s8_get_buffer_size_mve(f));
    else if (strcmp(kind, "fc_s16") == 0)
        *size = PICK(path,
                     arm_fully_connected_s16_get_buffer_size(f),
                     arm_fully_connected_s16_get_buffer_size_dsp(f),
                     arm_fully_connected_s16_get_buffer_size_mve(f));
    else if (strcmp(kind, "avgpool_s8") == 0)
        *size = PICK(path,
                     arm_avgpool_s8_get_buffer_size(o->w, i->c),
                     arm_avgpool_s8_get_buffer_size_dsp(o->w, i->c),
                     arm_avgpool_s8_get_buffer_size_mve(o->w, i->c));
    else if (strcmp(kind, "avgpool_s16") == 0)
        *size = PICK(path,
                     arm_avgpool_s16_get_buffer_size(o->w, i->c),
                     arm_avgpool_s16_get_buffer_size_dsp(o->w, i->c),
                     arm_avgpool_s16_get_buffer_size_mve(o->w, i->c));
    else if (strcmp(kind, "transpose_conv_s8") == 0) /* no _dsp variant: the DSP path is the plain one */
        *size = PICK(path,
                     arm_transpose_conv_s8_get_buffer_size(&tp, i, f, o),
                     arm_transpose_conv_s8_get_buffer_size(&tp, i, f, o),
                     arm_transpose_conv_s8_get_buffer_size_mve(&tp, i, f, o));
    else if (strcmp(kind, "svdf_s8") == 0) /* f: weights_feature_dims {n = filters, h = depth} */
        *size = PICK(path,
                     arm_svdf_s8_get_buffer_size(f),
                     arm_svdf_s8_get_buffer_size_dsp(f),
                     arm_svdf_s8_get_buffer_size_mve(f));
    else if (strcmp(kind, "reverse_conv_s8") == 0)
        *size = arm_transpose_conv_s8_get_reverse_conv_buffer_size(&tp, i, f);
    else
        return 0;
    return 1;
}

int main(void)
{
    char kind[32], path[8];
    request r;
    while (scanf("%31s %7s", kind, path) == 2)
    {
        int32_t *fields[] = {&r.input.n,  &r.input.h,  &r.input.w,  &r.input.c,   &r.filter.n,   &r.filter.h,
                             &r.filter.w, &r.filter.c, &r.output.n, &r.output.h,  &r.output.w,   &r.output.c,
                             &r.stride.h, &r.stride.w, &r.padding.h, &r.padding.w, &r.dilation.h, &r.dilation.w,
                             &r.ch_mult};
        for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
        {
            if (scanf("%d", fields[k]) != 1)
            {
                fprintf(stderr, "request %s %s: expected 19 integers\n", kind, path);
                return 2;
            }
        }
        int32_t size = 0;
        if (!size_of(kind, path, &r, &size))
        {
            fprintf(stderr, "unknown kind %s\n", kind);
            return 2;
        }
        printf("%d\n", (int)size);
    }
    return 0;
}
