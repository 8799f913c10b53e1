/*
 * cmsisnn_recurrent_runner: one call of a CMSIS-NN recurrent kernel, for bit-exactness checks and timing.
 *
 *   cmsisnn_recurrent_runner CALL RESULT [--repeat R]
 *
 * Reads one call written by quantcore.verify.host_recurrent, runs it once from the given state and writes
 * what the kernel wrote (outputs and state buffers); then, with --repeat R, runs it R more times on scratch
 * copies of the state and prints one line
 *   kind=K repeat=R elapsed_ns=T
 * where T covers those R calls only (clock_gettime, CLOCK_MONOTONIC). Exit status: 0 success, 2 bad usage
 * or file, 3 a CMSIS-NN call did not return ARM_CMSIS_NN_SUCCESS.
 *
 * File formats: little-endian int32 fields; arrays are elem_size(1|2|4|8) count data padded to 4 bytes.
 *   CALL    "FXRC" version(=1) kind, then by kind:
 *     1 arm_lstm_unidirectional_s8, 2 arm_lstm_unidirectional_s16:
 *       time_major batch time_steps input_size hidden_size input_offset forget_to_cell_mult
 *       forget_to_cell_shift input_to_cell_mult input_to_cell_shift cell_clip cell_scale_power
 *       output_mult output_shift output_offset stateful, then per gate (forget, input, cell, output):
 *       input_mult input_shift hidden_mult hidden_shift activation(0 sigmoid, 1 tanh) and the arrays
 *       input_weights hidden_weights input_effective_bias hidden_effective_bias; then the arrays input and,
 *       when stateful, hidden_state and cell_state.
 *     3 arm_svdf_s8, 4 arm_svdf_state_s16_s8:
 *       rank input_offset output_offset input_mult input_shift output_mult output_shift in_act_min
 *       in_act_max out_act_min out_act_max batches input_size feature_batches time_batches calls has_bias,
 *       then the arrays weights_feature weights_time [bias] state inputs (calls * batches * input_size).
 *   RESULT  "FXRR" version(=1) kind array_count, then the arrays: LSTM output, [hidden_state], cell_state;
 *           SVDF the outputs of every call (calls * batches * units int8), then the final state.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arm_nnfunctions.h"

enum { KIND_LSTM_S8 = 1, KIND_LSTM_S16, KIND_SVDF_S8, KIND_SVDF_S16 };

typedef struct {
    int32_t elem_size, count;
    void *data;
} array_t;

static void die(int status, const char *what, const char *detail) {
    fprintf(stderr, "cmsisnn_recurrent_runner: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(status);
}

/* ------------------------------------------------------------------------------------------ reading */

typedef struct {
    const uint8_t *p, *end;
    const char *name;
} cursor_t;

static const uint8_t *take(cursor_t *c, size_t n) {
    if ((size_t)(c->end - c->p) < n) die(2, "truncated file", c->name);
    const uint8_t *at = c->p;
    c->p += n;
    return at;
}

static int32_t i32(cursor_t *c) {
    const uint8_t *b = take(c, 4);
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

static array_t array(cursor_t *c, int32_t elem_size, int32_t count) {
    array_t a = {i32(c), i32(c), NULL};
    if (a.elem_size != elem_size || a.count != count) die(2, "array of unexpected type or size", c->name);
    size_t bytes = (size_t)a.elem_size * (size_t)a.count;
    /* A copy: the kernels update state buffers in place, and int16/int32/int64 need their alignment. */
    a.data = calloc(bytes ? bytes : 1, 1);
    if (!a.data) die(2, "out of memory", NULL);
    memcpy(a.data, take(c, bytes), bytes);
    take(c, (4 - bytes % 4) % 4);
    return a;
}

static uint8_t *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) die(2, "cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
    if (!data || (n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n)) die(2, "cannot read", path);
    fclose(f);
    *size = (size_t)n;
    return data;
}

/* ------------------------------------------------------------------------------------------ writing */

typedef struct {
    FILE *f;
    const char *name;
} writer_t;

static void put_i32(writer_t *w, int32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    if (fwrite(b, 1, 4, w->f) != 4) die(2, "cannot write", w->name);
}

static void put_array(writer_t *w, int32_t elem_size, int32_t count, const void *data) {
    static const uint8_t zeros[4] = {0};
    size_t bytes = (size_t)elem_size * (size_t)count;
    put_i32(w, elem_size);
    put_i32(w, count);
    if (bytes && fwrite(data, 1, bytes, w->f) != bytes) die(2, "cannot write", w->name);
    size_t pad = (4 - bytes % 4) % 4;
    if (pad && fwrite(zeros, 1, pad, w->f) != pad) die(2, "cannot write", w->name);
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void check(arm_cmsis_nn_status status, const char *kernel) {
    if (status != ARM_CMSIS_NN_SUCCESS) die(3, "kernel did not return ARM_CMSIS_NN_SUCCESS", kernel);
}

/* --------------------------------------------------------------------------------------------- LSTM */

typedef struct {
    cmsis_nn_lstm_params params;
    array_t input, hidden, cell;
    int32_t stateful, io_size, bias_size, out_count, state_count;
} lstm_call_t;

static cmsis_nn_lstm_gate lstm_gate(cursor_t *c, int32_t input_size, int32_t hidden, int32_t bias_size) {
    cmsis_nn_lstm_gate g;
    g.input_multiplier = i32(c);
    g.input_shift = i32(c);
    g.hidden_multiplier = i32(c);
    g.hidden_shift = i32(c);
    g.activation_type = i32(c) ? ARM_TANH : ARM_SIGMOID;
    g.input_weights = array(c, 1, hidden * input_size).data;
    g.hidden_weights = array(c, 1, hidden * hidden).data;
    g.input_effective_bias = array(c, bias_size, hidden).data;
    g.hidden_effective_bias = array(c, bias_size, hidden).data;
    g.bias = NULL; /* already inside the effective biases; the kernels do not read it */
    return g;
}

static lstm_call_t read_lstm(cursor_t *c, int32_t kind) {
    lstm_call_t call;
    cmsis_nn_lstm_params *p = &call.params;
    call.io_size = kind == KIND_LSTM_S8 ? 1 : 2;
    call.bias_size = kind == KIND_LSTM_S8 ? 4 : 8;
    p->time_major = i32(c);
    p->batch_size = i32(c);
    p->time_steps = i32(c);
    p->input_size = i32(c);
    p->hidden_size = i32(c);
    p->input_offset = i32(c);
    p->forget_to_cell_multiplier = i32(c);
    p->forget_to_cell_shift = i32(c);
    p->input_to_cell_multiplier = i32(c);
    p->input_to_cell_shift = i32(c);
    p->cell_clip = i32(c);
    p->cell_scale_power = i32(c);
    p->output_multiplier = i32(c);
    p->output_shift = i32(c);
    p->output_offset = i32(c);
    call.stateful = i32(c);
    p->forget_gate = lstm_gate(c, p->input_size, p->hidden_size, call.bias_size);
    p->input_gate = lstm_gate(c, p->input_size, p->hidden_size, call.bias_size);
    p->cell_gate = lstm_gate(c, p->input_size, p->hidden_size, call.bias_size);
    p->output_gate = lstm_gate(c, p->input_size, p->hidden_size, call.bias_size);
    call.input = array(c, call.io_size, p->batch_size * p->time_steps * p->input_size);
    call.out_count = p->batch_size * p->time_steps * p->hidden_size;
    call.state_count = p->batch_size * p->hidden_size;
    if (call.stateful) {
        call.hidden = array(c, call.io_size, call.state_count);
        call.cell = array(c, 2, call.state_count);
    }
    return call;
}

/* Runs the call on copies of its state; `hidden`/`cell` receive the buffers as the kernel leaves them. */
static void lstm_once(const lstm_call_t *call, int32_t kind, void *output, void *hidden, int16_t *cell,
                      int16_t *temp1, int16_t *temp2) {
    cmsis_nn_lstm_context buffers = {temp1, temp2, cell, NULL};
    if (call->stateful) {
        memcpy(hidden, call->hidden.data, (size_t)call->io_size * (size_t)call->state_count);
        memcpy(cell, call->cell.data, sizeof(int16_t) * (size_t)call->state_count);
        buffers.hidden_state = hidden;
    }
    if (kind == KIND_LSTM_S8)
        check(arm_lstm_unidirectional_s8(call->input.data, output, &call->params, &buffers),
              "arm_lstm_unidirectional_s8");
    else
        check(arm_lstm_unidirectional_s16(call->input.data, output, &call->params, &buffers),
              "arm_lstm_unidirectional_s16");
}

static int32_t run_lstm(cursor_t *c, int32_t kind, writer_t *w, int32_t repeat, double *elapsed) {
    lstm_call_t call = read_lstm(c, kind);
    size_t states = (size_t)(call.state_count ? call.state_count : 1);
    void *output = calloc((size_t)(call.out_count ? call.out_count : 1), (size_t)call.io_size);
    void *hidden = calloc(states, (size_t)call.io_size);
    int16_t *cell = calloc(states, sizeof(int16_t));
    int16_t *temp1 = calloc(states, sizeof(int16_t));
    int16_t *temp2 = calloc(states, sizeof(int16_t));
    if (!output || !hidden || !cell || !temp1 || !temp2) die(2, "out of memory", NULL);
    lstm_once(&call, kind, output, hidden, cell, temp1, temp2);
    put_i32(w, call.stateful ? 3 : 2);
    put_array(w, call.io_size, call.out_count, output);
    if (call.stateful) put_array(w, call.io_size, call.state_count, hidden);
    put_array(w, 2, call.state_count, cell);
    double start = now_ns();
    for (int32_t r = 0; r < repeat; r++) lstm_once(&call, kind, output, hidden, cell, temp1, temp2);
    *elapsed = now_ns() - start;
    return 0;
}

/* --------------------------------------------------------------------------------------------- SVDF */

static int32_t run_svdf(cursor_t *c, int32_t kind, writer_t *w, int32_t repeat, double *elapsed) {
    cmsis_nn_svdf_params params;
    cmsis_nn_per_tensor_quant_params in_quant, out_quant;
    params.rank = i32(c);
    params.input_offset = i32(c);
    params.output_offset = i32(c);
    in_quant.multiplier = i32(c);
    in_quant.shift = i32(c);
    out_quant.multiplier = i32(c);
    out_quant.shift = i32(c);
    params.input_activation.min = i32(c);
    params.input_activation.max = i32(c);
    params.output_activation.min = i32(c);
    params.output_activation.max = i32(c);
    int32_t batches = i32(c), input_size = i32(c), features = i32(c), time = i32(c), calls = i32(c);
    int32_t has_bias = i32(c);
    int32_t state_size = kind == KIND_SVDF_S8 ? 1 : 2;
    int32_t units = features / params.rank;
    array_t wf = array(c, 1, features * input_size);
    array_t wt = array(c, state_size, features * time);
    array_t bias = has_bias ? array(c, 4, units) : (array_t){4, 0, NULL};
    array_t state0 = array(c, state_size, batches * features * time);
    array_t inputs = array(c, 1, calls * batches * input_size);

    cmsis_nn_dims input_dims = {batches, input_size, 1, 1}, wf_dims = {features, 1, 1, input_size};
    cmsis_nn_dims wt_dims = {features, time, 1, 1}, state_dims = {batches, features, time, 1};
    cmsis_nn_dims bias_dims = {1, 1, 1, units}, out_dims = {batches, units, 1, 1};
    cmsis_nn_context ctx = {NULL, 0}, input_ctx, output_ctx;
    input_ctx.size = (int32_t)sizeof(int32_t) * batches * features;
    output_ctx.size = (int32_t)sizeof(int32_t) * batches * (units ? units : 1);
    input_ctx.buf = malloc((size_t)input_ctx.size);
    output_ctx.buf = malloc((size_t)output_ctx.size);
    if (kind == KIND_SVDF_S8) {
        ctx.size = arm_svdf_s8_get_buffer_size(&wf_dims);
        ctx.buf = malloc(ctx.size > 0 ? (size_t)ctx.size : 1);
        if (ctx.size > 0) /* the MVE build reads precomputed kernel sums, as its unit test prepares them */
            arm_vector_sum_s8(ctx.buf, input_size, features, wf.data, -params.input_offset, 0, NULL);
    }
    size_t state_bytes = (size_t)state_size * (size_t)state0.count;
    void *state = malloc(state_bytes ? state_bytes : 1);
    int8_t *outputs = calloc((size_t)(calls * batches * units) + 1, 1);
    if (!input_ctx.buf || !output_ctx.buf || !state || !outputs) die(2, "out of memory", NULL);

    double start = 0;
    for (int32_t r = 0; r <= repeat; r++) {
        if (r == 1) start = now_ns();
        memcpy(state, state0.data, state_bytes);
        for (int32_t k = 0; k < calls; k++) {
            const int8_t *x = (const int8_t *)inputs.data + (size_t)k * (size_t)(batches * input_size);
            int8_t *out = outputs + (size_t)k * (size_t)(batches * units);
            if (kind == KIND_SVDF_S8)
                check(arm_svdf_s8(&ctx, &input_ctx, &output_ctx, &params, &in_quant, &out_quant, &input_dims, x,
                                  &state_dims, state, &wf_dims, wf.data, &wt_dims, wt.data, &bias_dims, bias.data,
                                  &out_dims, out),
                      "arm_svdf_s8");
            else
                check(arm_svdf_state_s16_s8(&input_ctx, &output_ctx, &params, &in_quant, &out_quant, &input_dims,
                                            x, &state_dims, state, &wf_dims, wf.data, &wt_dims, wt.data,
                                            &bias_dims, bias.data, &out_dims, out),
                      "arm_svdf_state_s16_s8");
        }
        if (r == 0) {
            put_i32(w, 2);
            put_array(w, 1, calls * batches * units, outputs);
            put_array(w, state_size, state0.count, state);
        }
    }
    *elapsed = repeat ? now_ns() - start : 0;
    return 0;
}

/* --------------------------------------------------------------------------------------------- main */

int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 5 && strcmp(argv[3], "--repeat") == 0))
        die(2, "usage: cmsisnn_recurrent_runner CALL RESULT [--repeat R]", NULL);
    int32_t repeat = argc == 5 ? atoi(argv[4]) : 0;
    if (repeat < 0) die(2, "--repeat must be >= 0", argv[4]);
    size_t size;
    uint8_t *data = slurp(argv[1], &size);
    cursor_t c = {data, data + size, argv[1]};
    if (memcmp(take(&c, 4), "FXRC", 4) != 0 || i32(&c) != 1) die(2, "not a version-1 FXRC file", argv[1]);
    int32_t kind = i32(&c);
    writer_t w = {fopen(argv[2], "wb"), argv[2]};
    if (!w.f) die(2, "cannot create", argv[2]);
    if (fwrite("FXRR", 1, 4, w.f) != 4) die(2, "cannot write", argv[2]);
    put_i32(&w, 1);
    put_i32(&w, kind);
    double elapsed = 0;
    if (kind == KIND_LSTM_S8 || kind == KIND_LSTM_S16)
        run_lstm(&c, kind, &w, repeat, &elapsed);
    else if (kind == KIND_SVDF_S8 || kind == KIND_SVDF_S16)
        run_svdf(&c, kind, &w, repeat, &elapsed);
    else
        die(2, "unknown kind", argv[1]);
    if (fclose(w.f) != 0) die(2, "cannot write", argv[2]);
    printf("kind=%d repeat=%d elapsed_ns=%.0f\n", kind, repeat, elapsed);
    return 0;
}
