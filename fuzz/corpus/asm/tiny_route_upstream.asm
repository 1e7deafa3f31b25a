;; plena moe preset=tiny-route-16x1 T=4 E=16 k=1
; @routed_lowering=expert_major
; @stage=residual_setup
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
