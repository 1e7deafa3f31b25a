
; plena moe preset=tiny-route-16x1 T=4 E=16 k=1
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
; @stage=router_topk
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
; @stage=accumulator_init
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
; @stage=router_topk
; top-k register (E=16, k=1)
S_LUI_INT gp1, 1
S_ADDI_INT gp1, gp1, 1
C_SET_TOPK_REG gp1
; @stage=gather
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
; @stage=router_topk
S_LUI_INT gp13, 0
S_ADDI_INT gp13, gp13, 80
S_LUI_INT gp14, 4
S_ADDI_INT gp14, gp14, 0
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 0
; @stage=gather
C_LOOP_START gp1, 4
; @stage=router_topk
V_TOPK gp13, gp14, gp6, 15
; @stage=gather
S_ADDI_INT gp15, gp0, 0
C_LOOP_START gp2, 1
S_LD_INT gp4, gp15, 0
S_LD_INT gp5, gp4, 1
S_ADDI_INT gp5, gp5, 1
S_ST_INT gp5, gp4, 1
S_ADDI_INT gp15, gp15, 1
C_LOOP_END gp2
; @stage=router_topk
S_ADDI_INT gp14, gp14, 64
; @stage=gather
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
S_ST_INT gp12, gp9, 1
S_ADD_INT gp9, gp9, gp11
S_ADD_INT gp6, gp0, gp0
C_LOOP_END gp3
S_SUB_INT gp6, gp9, gp11
S_LD_INT gp7, gp0, 30
S_ST_INT gp7, gp6, 1
S_ADDI_INT gp4, gp4, 1
C_LOOP_END gp1
S_ADDI_INT gp7, gp0, 1
S_SUB_INT gp6, gp10, gp7
S_ST_INT gp6, gp0, 43
S_SUB_INT gp6, gp8, gp7
S_ST_INT gp6, gp0, 44
; expert-major padding slots: the zero row
S_LD_FP f1, gp0, 64
S_LUI_INT gp10, 0
S_ADDI_INT gp10, gp10, 1024
S_LUI_INT gp11, 0
S_ADDI_INT gp11, gp11, 512
S_LUI_INT gp5, 0
S_ADDI_INT gp5, gp5, 17
S_ADDI_INT gp9, gp0, 0
S_LD_INT gp4, gp0, 43
C_LOOP_START gp1, 1
S_ADD_INT gp1, gp1, gp4
S_LD_INT gp6, gp5, 1
S_ADDI_INT gp6, gp6, 1
S_LUI_INT gp4, 0
S_ADDI_INT gp4, gp4, 256
S_MUL_INT gp6, gp6, gp4
S_ADD_INT gp6, gp6, gp9
S_LUI_INT gp4, 4
S_ADDI_INT gp4, gp4, 3904
S_ADD_INT gp6, gp6, gp4
C_LOOP_START gp2, 3
S_ADDI_INT gp7, gp6, 0
S_LUI_INT gp8, 0
S_ADDI_INT gp8, gp8, 256
C_LOOP_START gp3, 1
V_MUL_VF gp7, gp8, f1
S_ADD_INT gp7, gp7, gp10
S_ADD_INT gp8, gp8, gp11
C_LOOP_END gp3
S_ADDI_INT gp6, gp6, 64
C_LOOP_END gp2
S_LD_INT gp12, gp5, 1
S_ADDI_INT gp12, gp12, 1
S_LUI_INT gp13, 0
S_ADDI_INT gp13, gp13, 256
S_MUL_INT gp12, gp12, gp13
S_ADD_INT gp9, gp9, gp12
S_ADDI_INT gp5, gp5, 2
S_ADD_INT gp4, gp0, gp0
C_LOOP_END gp1
S_LD_FP f1, gp0, 64
S_LUI_INT gp2, 0
S_ADDI_INT gp2, gp2, 1024
S_LUI_INT gp3, 0
S_ADDI_INT gp3, gp3, 512
; expert-major gather: each pair's row into its expert's next slot
S_ADDI_INT gp14, gp0, 0
; @stage=router_topk
S_LUI_INT gp7, 0
S_ADDI_INT gp7, gp7, 80
S_LUI_INT gp8, 4
S_ADDI_INT gp8, gp8, 0
S_LUI_INT gp9, 0
S_ADDI_INT gp9, gp9, 0
; @stage=gather
C_LOOP_START gp4, 4
; @stage=router_topk
V_TOPK gp7, gp8, gp9, 15
; @stage=gather
S_ADDI_INT gp10, gp0, 0
C_LOOP_START gp5, 1
S_LD_INT gp11, gp10, 0
S_LD_INT gp12, gp11, 1
S_ADDI_INT gp13, gp12, 1
S_ST_INT gp13, gp11, 1
S_LUI_INT gp13, 0
S_ADDI_INT gp13, gp13, 64
S_MUL_INT gp12, gp12, gp13
S_LUI_INT gp13, 5
S_ADDI_INT gp13, gp13, 0
S_ADD_INT gp13, gp13, gp12
S_LUI_INT gp12, 0
S_ADDI_INT gp12, gp12, 0
S_ADD_INT gp12, gp12, gp14
S_ADDI_INT gp11, gp13, 0
C_LOOP_START gp6, 1
V_MUL_VF gp11, gp12, f1
S_ADD_INT gp11, gp11, gp2
S_ADD_INT gp12, gp12, gp3
C_LOOP_END gp6
S_ADDI_INT gp13, gp13, 64
S_ADDI_INT gp10, gp10, 1
C_LOOP_END gp5
S_ADDI_INT gp14, gp14, 64
; @stage=router_topk
S_ADDI_INT gp8, gp8, 64
; @stage=gather
C_LOOP_END gp4
; @stage=expert_weight_prefetch
; expert-major gate projection over the segments
S_LUI_INT gp4, 1
S_ADDI_INT gp4, gp4, 0
C_SET_SCALE_REG gp4
S_LUI_INT gp4, 0
S_ADDI_INT gp4, gp4, 64
C_SET_STRIDE_REG gp4
; @stage=expert_weight_address
S_LUI_INT gp2, 0
S_ADDI_INT gp2, gp2, 17
S_ADDI_INT gp5, gp0, 0
S_LD_INT gp4, gp0, 43
C_LOOP_START gp1, 1
S_ADD_INT gp1, gp1, gp4
S_LD_INT gp6, gp2, 0
S_LUI_INT gp7, 1
S_ADDI_INT gp7, gp7, 512
S_MUL_INT gp8, gp6, gp7
S_LUI_INT gp9, 1
S_ADDI_INT gp9, gp9, 512
S_ADD_INT gp9, gp9, gp8
C_SET_ADDR_REG a1, gp0, gp9
; @stage=expert_weight_prefetch
S_ADDI_INT gp6, gp0, 0
S_LUI_INT gp7, 0
S_ADDI_INT gp7, gp7, 0
H_PREFETCH_M gp6, gp7, a1, 1
; @stage=expert_projection
S_ADDI_INT gp3, gp5, 0
S_LD_INT gp4, gp2, 1
S_LUI_INT gp10, 5
S_ADDI_INT gp10, gp10, 0
S_ADD_INT gp10, gp10, gp3
S_LUI_INT gp7, 6
S_ADDI_INT gp7, gp7, 0
S_ADD_INT gp7, gp7, gp3
C_LOOP_START gp9, 1
S_ADD_INT gp9, gp9, gp4
S_ADDI_INT gp8, gp0, 0
C_LOOP_START gp6, 16
M_MM 0, gp8, gp10
M_MM_WO gp7, gp0, 0
S_ADDI_INT gp8, gp8, 256
S_ADDI_INT gp7, gp7, 4
C_LOOP_END gp6
S_ADDI_INT gp10, gp10, 256
S_ADDI_INT gp7, gp7, 192
S_ADD_INT gp4, gp0, gp0
C_LOOP_END gp9
; @stage=expert_weight_address
S_LD_INT gp6, gp2, 1
S_ADDI_INT gp6, gp6, 1
S_LUI_INT gp7, 0
S_ADDI_INT gp7, gp7, 256
S_MUL_INT gp6, gp6, gp7
S_ADD_INT gp5, gp5, gp6
S_ADDI_INT gp2, gp2, 2
S_ADD_INT gp4, gp0, gp0
C_LOOP_END gp1
; @stage=expert_weight_prefetch
; expert-major up projection over the segments
S_LUI_INT gp4, 1
S_ADDI_INT gp4, gp4, 0
C_SET_SCALE_REG gp4
S_LUI_INT gp4, 0
S_ADDI_INT gp4, gp4, 64
C_SET_STRIDE_REG gp4
; @stage=expert_weight_address
S_LUI_INT gp2, 0
S_ADDI_INT gp2, gp2, 17
S_ADDI_INT gp5, gp0, 0
S_LD_INT gp4, gp0, 43
C_LOOP_START gp1, 1
S_ADD_INT gp1, gp1, gp4
S_LD_INT gp6, gp2, 0
S_LUI_INT gp7, 1
S_ADDI_INT gp7, gp7, 512
S_MUL_INT gp8, gp6, gp7
S_LUI_INT gp9, 19
S_ADDI_INT gp9, gp9, 512
S_ADD_INT gp9, gp9, gp8
C_SET_ADDR_REG a1, gp0, gp9
; @stage=expert_weight_prefetch
S_ADDI_INT gp6, gp0, 0
S_LUI_INT gp7, 0
S_ADDI_INT gp7, gp7, 0
H_PREFETCH_M gp6, gp7, a1, 1
; @stage=expert_projection
S_ADDI_INT gp3, gp5, 0
S_LD_INT gp4, gp2, 1
S_LUI_INT gp10, 5
S_ADDI_INT gp10, gp10, 0
S_ADD_INT gp10, gp10, gp3
S_LUI_INT gp7, 7
S_ADDI_INT gp7, gp7, 0
S_ADD_INT gp7, gp7, gp3
C_LOOP_START gp9, 1
S_ADD_INT gp9, gp9, gp4
S_ADDI_INT gp8, gp0, 0
C_LOOP_START gp6, 16
M_MM 0, gp8, gp10
M_MM_WO gp7, gp0, 0
S_ADDI_INT gp8, gp8, 256
S_ADDI_INT gp7, gp7, 4
C_LOOP_END gp6
S_ADDI_INT gp10, gp10, 256
S_ADDI_INT gp7, gp7, 192
S_ADD_INT gp4, gp0, gp0
C_LOOP_END gp9
; @stage=expert_weight_address
S_LD_INT gp6, gp2, 1
S_ADDI_INT gp6, gp6, 1
S_LUI_INT gp7, 0
S_ADDI_INT gp7, gp7, 256
S_MUL_INT gp6, gp6, gp7
S_ADD_INT gp5, gp5, gp6
S_ADDI_INT gp2, gp2, 2
S_ADD_INT gp4, gp0, gp0
C_LOOP_END gp1
; @stage=expert_activation
S_LD_FP f1, gp0, 64
S_LD_FP f2, gp0, 65
S_LUI_INT gp3, 6
S_ADDI_INT gp3, gp3, 0
S_LUI_INT gp4, 7
S_ADDI_INT gp4, gp4, 0
S_LUI_INT gp5, 8
S_ADDI_INT gp5, gp5, 0
S_LUI_INT gp10, 0
S_ADDI_INT gp10, gp10, 1024
S_LD_INT gp9, gp0, 44
C_LOOP_START gp1, 1
S_ADD_INT gp1, gp1, gp9
S_ADDI_INT gp6, gp3, 0
S_ADDI_INT gp7, gp4, 0
S_ADDI_INT gp8, gp5, 0
C_LOOP_START gp2, 1
V_MUL_VF gp8, gp6, f2
V_EXP_V gp8, gp8
V_ADD_VF gp8, gp8, f1
V_RECI_V gp8, gp8
V_MUL_VV gp6, gp6, gp8
V_MUL_VV gp7, gp7, gp6
S_ADD_INT gp6, gp6, gp10
S_ADD_INT gp7, gp7, gp10
S_ADD_INT gp8, gp8, gp10
C_LOOP_END gp2
S_ADDI_INT gp3, gp3, 64
S_ADDI_INT gp4, gp4, 64
S_ADDI_INT gp5, gp5, 64
S_ADD_INT gp9, gp0, gp0
C_LOOP_END gp1
; @stage=expert_weight_prefetch
; expert-major down projection over the segments
S_LUI_INT gp4, 1
S_ADDI_INT gp4, gp4, 0
C_SET_SCALE_REG gp4
S_LUI_INT gp4, 0
S_ADDI_INT gp4, gp4, 64
C_SET_STRIDE_REG gp4
; @stage=expert_weight_address
S_LUI_INT gp2, 0
S_ADDI_INT gp2, gp2, 17
S_ADDI_INT gp5, gp0, 0
S_LD_INT gp4, gp0, 43
C_LOOP_START gp1, 1
S_ADD_INT gp1, gp1, gp4
S_LD_INT gp6, gp2, 0
S_LUI_INT gp7, 1
S_ADDI_INT gp7, gp7, 512
S_MUL_INT gp8, gp6, gp7
S_LUI_INT gp9, 37
S_ADDI_INT gp9, gp9, 512
S_ADD_INT gp9, gp9, gp8
C_SET_ADDR_REG a1, gp0, gp9
; @stage=expert_weight_prefetch
S_ADDI_INT gp6, gp0, 0
S_LUI_INT gp7, 0
S_ADDI_INT gp7, gp7, 0
H_PREFETCH_M gp6, gp7, a1, 1
; @stage=expert_projection
S_ADDI_INT gp3, gp5, 0
S_LD_INT gp4, gp2, 1
S_LUI_INT gp10, 7
S_ADDI_INT gp10, gp10, 0
S_ADD_INT gp10, gp10, gp3
S_LUI_INT gp7, 5
S_ADDI_INT gp7, gp7, 0
S_ADD_INT gp7, gp7, gp3
C_LOOP_START gp9, 1
S_ADD_INT gp9, gp9, gp4
S_ADDI_INT gp8, gp0, 0
C_LOOP_START gp6, 16
M_MM 0, gp8, gp10
M_MM_WO gp7, gp0, 0
S_ADDI_INT gp8, gp8, 256
S_ADDI_INT gp7, gp7, 4
C_LOOP_END gp6
S_ADDI_INT gp10, gp10, 256
S_ADDI_INT gp7, gp7, 192
S_ADD_INT gp4, gp0, gp0
C_LOOP_END gp9
; @stage=expert_weight_address
S_LD_INT gp6, gp2, 1
S_ADDI_INT gp6, gp6, 1
S_LUI_INT gp7, 0
S_ADDI_INT gp7, gp7, 256
S_MUL_INT gp6, gp6, gp7
S_ADD_INT gp5, gp5, gp6
S_ADDI_INT gp2, gp2, 2
S_ADD_INT gp4, gp0, gp0
C_LOOP_END gp1
; @stage=scatter_combine
; expert-major: counters back to the start slots
S_LD_INT gp4, gp0, 43
S_ADD_INT gp2, gp4, gp4
S_LUI_INT gp5, 0
S_ADDI_INT gp5, gp5, 17
S_ADD_INT gp2, gp2, gp5
S_LD_INT gp3, gp0, 44
S_ADDI_INT gp3, gp3, 1
S_ADDI_INT gp7, gp0, 2
C_LOOP_START gp1, 1
S_ADD_INT gp1, gp1, gp4
S_LD_INT gp5, gp2, 1
S_ADDI_INT gp5, gp5, 1
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 4
S_MUL_INT gp5, gp5, gp6
S_SUB_INT gp3, gp3, gp5
S_LD_INT gp6, gp2, 0
S_ST_INT gp3, gp6, 1
S_SUB_INT gp2, gp2, gp7
S_ADD_INT gp4, gp0, gp0
C_LOOP_END gp1
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 1024
S_LUI_INT gp7, 0
S_ADDI_INT gp7, gp7, 512
S_LUI_INT gp4, 3
S_ADDI_INT gp4, gp4, 0
S_LUI_INT gp5, 10
S_ADDI_INT gp5, gp5, 0
; @stage=router_topk
; expert-major combine: 4 tokens x top-1 in pair order
S_LUI_INT gp10, 0
S_ADDI_INT gp10, gp10, 80
S_LUI_INT gp11, 4
S_ADDI_INT gp11, gp11, 0
S_LUI_INT gp12, 0
S_ADDI_INT gp12, gp12, 0
; @stage=scatter_combine
C_LOOP_START gp8, 4
; @stage=router_topk
V_TOPK gp10, gp11, gp12, 15
; @stage=scatter_combine
S_ADDI_INT gp13, gp0, 0
C_LOOP_START gp9, 1
S_LD_INT gp14, gp13, 0
S_LD_INT gp15, gp14, 1
S_ADDI_INT gp2, gp15, 1
S_ST_INT gp2, gp14, 1
S_LUI_INT gp2, 0
S_ADDI_INT gp2, gp2, 64
S_MUL_INT gp15, gp15, gp2
S_LUI_INT gp2, 5
S_ADDI_INT gp2, gp2, 0
S_ADD_INT gp2, gp2, gp15
; @stage=expert_route_weight
S_LD_FP f1, gp13, 80
; @stage=scatter_combine
S_ADDI_INT gp3, gp4, 0
C_LOOP_START gp1, 1
; @stage=expert_route_weight
V_MUL_VF gp5, gp2, f1
; @stage=scatter_combine
V_ADD_VV gp3, gp3, gp5
S_ADD_INT gp2, gp2, gp6
S_ADD_INT gp3, gp3, gp7
C_LOOP_END gp1
S_ADDI_INT gp13, gp13, 1
C_LOOP_END gp9
S_ADDI_INT gp4, gp4, 64
; @stage=router_topk
S_ADDI_INT gp11, gp11, 64
; @stage=scatter_combine
C_LOOP_END gp8
; @stage=residual_setup
; residual add-back
S_LUI_INT gp1, 3
S_ADDI_INT gp1, gp1, 0
S_LUI_INT gp3, 0
S_ADDI_INT gp3, gp3, 512
S_LUI_INT gp4, 1
S_ADDI_INT gp4, gp4, 0
S_LUI_INT gp6, 0
S_ADDI_INT gp6, gp6, 512
C_LOOP_START gp7, 4
S_ADDI_INT gp2, gp1, 0
S_ADDI_INT gp5, gp4, 0
C_LOOP_START gp8, 1
V_ADD_VV gp2, gp2, gp5
S_ADD_INT gp2, gp2, gp3
S_ADD_INT gp5, gp5, gp6
C_LOOP_END gp8
S_ADDI_INT gp1, gp1, 64
S_ADDI_INT gp4, gp4, 64
C_LOOP_END gp7
