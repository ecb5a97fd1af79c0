/* Private to src/sim: what the simulator's own command and its experiments
 * share beyond sim.h. */
#pragma once

#include "sim.h"

/* tenk sim --experiment fgd (experiments/fgd.c); argv[0] is "sim". */
int sim_fgd_main(int argc, char **argv);
/* `tenk sim --experiment ckpt`: the checkpoint interval against failures. */
int sim_ckpt_main(int argc, char **argv);
