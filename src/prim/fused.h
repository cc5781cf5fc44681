/*
 * The fused element-wise primitive (DESIGN section 5): a small program of
 * float32 element-wise instructions that compile's fusion pass builds from a
 * chain of element-wise nodes. Internal.
 *
 * The node's inputs are the chain's leaves; the output shape is their
 * broadcast shape (NumPy rules), so a shapeless replay re-infers it. Each
 * instruction's result is a value; instructions `outputs[0 .. noutputs)` are
 * the node's outputs, all of that shape. A program with one output is a node
 * of `fused`; one with k > 1 outputs is a multi-output primary of `fusedk`
 * (prim/sibling.h), so a chain whose intermediates are read elsewhere still
 * runs as one kernel.
 * Programs are immutable once built and refcounted (a cached trace and every
 * node replayed from it share one).
 */
#ifndef WEFT_PRIM_FUSED_H
#define WEFT_PRIM_FUSED_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/array.h"

enum wf_fused_opcode {
    WF_FUSED_INPUT, /* operand a: the node's input index */
    WF_FUSED_CONST, /* `constant` everywhere */
    /* unary: operand a */
    WF_FUSED_NEGATIVE,
    WF_FUSED_ABS,
    WF_FUSED_SQUARE,
    WF_FUSED_SQRT,
    WF_FUSED_RSQRT,
    WF_FUSED_RECIPROCAL,
    WF_FUSED_EXP,
    WF_FUSED_EXPM1,
    WF_FUSED_LOG,
    WF_FUSED_LOG1P,
    WF_FUSED_TANH,
    WF_FUSED_SIGMOID,
    WF_FUSED_ERF,
    WF_FUSED_SIN,
    WF_FUSED_COS,
    WF_FUSED_FLOOR,
    WF_FUSED_CEIL,
    /* binary: operands a and b */
    WF_FUSED_ADD,
    WF_FUSED_SUBTRACT,
    WF_FUSED_MULTIPLY,
    WF_FUSED_DIVIDE,
    WF_FUSED_MAXIMUM,
    WF_FUSED_MINIMUM,
    WF_FUSED_OPCODE_COUNT
};

typedef struct wf_fused_instr {
    int opcode; /* enum wf_fused_opcode */
    int a, b;   /* earlier instruction indices (or the input index for INPUT) */
    float constant;
} wf_fused_instr;

enum { WF_FUSED_MAX_OUTPUTS = 4 };

typedef struct wf_fused_program {
    atomic_int refcount;
    int ninputs;
    int ninstr;
    int noutputs;                      /* 1 .. WF_FUSED_MAX_OUTPUTS */
    int outputs[WF_FUSED_MAX_OUTPUTS]; /* distinct instructions: output k's values */
    uint64_t hash;
    wf_fused_instr instr[];
} wf_fused_program;

/* The node's parameters: one program reference (owned by the node). */
typedef struct wf_fused_params {
    wf_fused_program *program;
} wf_fused_params;

/* A program with room for `ninstr` instructions, refcount 1; the caller
 * fills instr, ninputs, noutputs and outputs, then calls wf__fused_program_seal. NULL
 * with the error recorded when memory is short. */
wf_fused_program *wf__fused_program_new(int ninstr);
/* Checks the program (operands refer to earlier instructions, inputs in
 * range, opcodes valid) and computes its hash. WF_ERR_INTERNAL if broken. */
wf_status wf__fused_program_seal(wf_fused_program *p);
wf_fused_program *wf__fused_program_retain(wf_fused_program *p);
void wf__fused_program_release(wf_fused_program *p);
/* True for the unary opcodes (operand a only). */
bool wf__fused_opcode_is_unary(int opcode);
/* The opcode's name ("add", "exp", ...), for messages and tests. */
const char *wf__fused_opcode_name(int opcode);

/* Fused kernels run so far (a test counter: compile really fused). */
uint64_t wf__fused_kernels_run(void);
void wf__fused_count_run(void);

extern const wf_prim_def wf__prim_fused;
/* Programs with 2, 3 and 4 outputs (multi-output primaries). */
extern const wf_prim_def wf__prim_fused2, wf__prim_fused3, wf__prim_fused4;

/* The fused primitive for a program with `noutputs` outputs (NULL out of range). */
const wf_prim_def *wf__prim_fused_for(int noutputs);
/* True for wf__prim_fused and its multi-output forms. */
bool wf__prim_is_fused(const wf_prim_def *prim);

#endif
