; expect: lenient 2:1: unknown mnemonic 'C_HADAMARD_TRANSFORM'
C_HADAMARD_TRANSFORM gp1
