/*
 * tenk-shim: the supervisor of one attempt's tasks on a node, a program of
 * its own so that it starts in a millisecond (src/agent/shim.c is all of
 * it). Agents start it; nobody else does.
 */
#include "agent/agent.h"

int main(int argc, char **argv)
{
	return shim_run(NULL, argc, argv);
}
