
; plena moe preset=tiny-route-16x1 T=4 E=16 k=1
; @routed_lowering=expert_major
S_LUI_INT gp1, 0
S_ADDI_INT gp1, gp1, 0
C_LOOP_START gp2, 64
S_ST_FP f0, gp1, 0
S_ADDI_INT gp1, gp1, 1
C_LOOP_END gp2
; residual setup: zero, copy, RMSNorm, norm weight
S_LUI_INT gp1, 1
S_ADDI_INT gp1, gp1, 0
S_LUI_INT gp3, 0
S_ADDI_INT gp3, gp3, 512
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 0
C_LOOP_START gp4, 8
S_ADDI_INT gp2, gp1, 0
C_LOOP_START gp5, 1
S_MAP_V_FP gp2, gp6, 0
S_ADD_INT gp2, gp2, gp3
C_LOOP_END gp5
S_ADDI_INT gp1, gp1, 64
C_LOOP_END gp4
S_LUI_INT gp1, 0
S_ADDI_INT gp1, gp1, 256
S_LUI_INT gp3, 0
S_ADDI_INT gp3, gp3, 512
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 0
C_LOOP_START gp4, 4
S_ADDI_INT gp2, gp1, 0
C_LOOP_START gp5, 1
S_MAP_V_FP gp2, gp6, 0
S_ADD_INT gp2, gp2, gp3
C_LOOP_END gp5
S_ADDI_INT gp1, gp1, 64
C_LOOP_END gp4
S_LD_FP f1, gp0, 64
S_LUI_INT gp1, 1
S_ADDI_INT gp1, gp1, 0
S_LUI_INT gp3, 0
S_ADDI_INT gp3, gp3, 512
S_LUI_INT gp4, 0
S_ADDI_INT gp4, gp4, 0
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 512
C_LOOP_START gp7, 4
S_ADDI_INT gp2, gp1, 0
S_ADDI_INT gp5, gp4, 0
C_LOOP_START gp8, 1
V_MUL_VF gp2, gp5, f1
S_ADD_INT gp2, gp2, gp3
S_ADD_INT gp5, gp5, gp6
C_LOOP_END gp8
S_ADDI_INT gp1, gp1, 64
S_ADDI_INT gp4, gp4, 64
C_LOOP_END gp7
S_LD_FP f3, gp0, 70
S_LD_FP f4, gp0, 69
S_LUI_INT gp3, 0
S_ADDI_INT gp3, gp3, 0
S_LUI_INT gp5, 11
S_ADDI_INT gp5, gp5, 0
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 512
C_LOOP_START gp1, 4
S_ADD_FP f1, f0, f0
S_ADDI_INT gp4, gp3, 0
C_LOOP_START gp2, 1
V_MUL_VV gp5, gp4, gp4
V_RED_SUM f1, gp5
S_ADD_INT gp4, gp4, gp6
C_LOOP_END gp2
S_MUL_FP f2, f1, f3
S_ADD_FP f2, f2, f4
S_SQRT_FP f2, f2
S_RECI_FP f2, f2
S_ADDI_INT gp4, gp3, 0
C_LOOP_START gp2, 1
V_MUL_VF gp4, gp4, f2
S_ADD_INT gp4, gp4, gp6
C_LOOP_END gp2
S_ADDI_INT gp3, gp3, 64
C_LOOP_END gp1
S_LUI_INT gp1, 0
S_ADDI_INT gp1, gp1, 0
S_LUI_INT gp3, 0
S_ADDI_INT gp3, gp3, 512
S_LUI_INT gp4, 2
S_ADDI_INT gp4, gp4, 0
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 256
C_LOOP_START gp7, 4
S_ADDI_INT gp2, gp1, 0
S_ADDI_INT gp5, gp4, 0
C_LOOP_START gp8, 1
V_MUL_VV gp2, gp2, gp5
S_ADD_INT gp2, gp2, gp3
S_ADD_INT gp5, gp5, gp6
C_LOOP_END gp8
S_ADDI_INT gp1, gp1, 64
C_LOOP_END gp7
; router logits (GEMM form)
S_LUI_INT gp1, 0
S_ADDI_INT gp1, gp1, 0
C_SET_ADDR_REG a0, gp0, gp1
S_LUI_INT gp1, 1
S_ADDI_INT gp1, gp1, 0
C_SET_SCALE_REG gp1
S_LUI_INT gp1, 0
S_ADDI_INT gp1, gp1, 64
C_SET_STRIDE_REG gp1
S_ADDI_INT gp1, gp0, 0
S_LUI_INT gp2, 0
S_ADDI_INT gp2, gp2, 0
H_PREFETCH_M gp1, gp2, a0, 1
S_LUI_INT gp4, 0
S_ADDI_INT gp4, gp4, 0
S_LUI_INT gp2, 4
S_ADDI_INT gp2, gp2, 0
S_ADDI_INT gp3, gp0, 0
C_LOOP_START gp1, 16
M_MM 0, gp3, gp4
M_MM_WO gp2, gp0, 0
S_ADDI_INT gp3, gp3, 256
S_ADDI_INT gp2, gp2, 4
C_LOOP_END gp1
; accumulator init
S_LUI_INT gp1, 3
S_ADDI_INT gp1, gp1, 0
S_LUI_INT gp3, 0
S_ADDI_INT gp3, gp3, 512
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 0
C_LOOP_START gp4, 8
S_ADDI_INT gp2, gp1, 0
C_LOOP_START gp5, 1
S_MAP_V_FP gp2, gp6, 0
S_ADD_INT gp2, gp2, gp3
C_LOOP_END gp5
S_ADDI_INT gp1, gp1, 64
C_LOOP_END gp4
; top-k register (E=16, k=1)
S_LUI_INT gp1, 1
S_ADDI_INT gp1, gp1, 1
C_SET_TOPK_REG gp1
; top-k encoding register
S_LUI_INT gp1, 55
S_ADDI_INT gp1, gp1, 512
C_SET_ADDR_REG a0, gp0, gp1
; expert-major sort: count 4 tokens x top-1 over 16 experts
S_ADDI_INT gp4, gp0, 0
C_LOOP_START gp1, 16
S_ST_INT gp0, gp4, 1
S_ADDI_INT gp4, gp4, 1
C_LOOP_END gp1
S_LUI_INT gp13, 0
S_ADDI_INT gp13, gp13, 80
S_LUI_INT gp14, 4
S_ADDI_INT gp14, gp14, 0
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 0
C_LOOP_START gp1, 4
V_TOPK gp13, gp14, gp6, 15
S_ADDI_INT gp15, gp0, 0
C_LOOP_START gp2, 1
S_LD_INT gp4, gp15, 0
S_LD_INT gp5, gp4, 1
S_ADDI_INT gp5, gp5, 1
S_ST_INT gp5, gp4, 1
S_ADDI_INT gp15, gp15, 1
C_LOOP_END gp2
S_ADDI_INT gp14, gp14, 64
C_LOOP_END gp1
; expert-major sort: start slots and segment records
S_ADDI_INT gp4, gp0, 0
S_ADDI_INT gp8, gp0, 0
S_ADDI_INT gp10, gp0, 0
S_LUI_INT gp9, 0
S_ADDI_INT gp9, gp9, 17
S_LUI_INT gp12, 0
S_ADDI_INT gp12, gp12, 484
C_LOOP_START gp1, 16
S_LD_INT gp5, gp4, 1
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 64
S_MUL_INT gp6, gp5, gp6
S_LUI_INT gp7, 0
S_ADDI_INT gp7, gp7, 27
H_PREFETCH_S gp7, gp6, a0
S_ST_INT gp8, gp4, 1
S_LD_INT gp6, gp0, 27
S_ADD_INT gp8, gp8, gp6
S_LD_INT gp6, gp0, 31
S_ADD_INT gp10, gp10, gp6
S_LD_INT gp11, gp0, 29
S_LD_INT gp6, gp0, 28
C_LOOP_START gp3, 1
S_ADD_INT gp3, gp3, gp6
S_ST_INT gp4, gp9, 0
