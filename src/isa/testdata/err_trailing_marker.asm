; expect: strict 2:27: stage marker must be on its own line
S_ADD_INT gp1, gp2, gp3 ; @stage=gather
