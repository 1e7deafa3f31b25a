
; expect: strict 3:10: unknown stage 'expert_bais' (expected one of: router_topk, accumulator_init, gather, expert_weight_address, expert_weight_prefetch, expert_projection, expert_activation, expert_bias, expert_route_weight, scatter_combine, residual_setup, shared_expert_projection, shared_expert_activation, shared_expert_gate, other)
S_ADDI_INT gp1, gp0, 5
; @stage=expert_bais
S_ADDI_INT gp1, gp0, 5
