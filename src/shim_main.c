/*
 * tenk-shim: the supervisor of one attempt's tasks on a node, a program of
 * its own so that it starts in a millisecond (src/agent/shim.c is all of
 * it). Agents start it; nobody else does.
 */
#include <string.h>

#include "agent/agent.h"

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--launcher") == 0)
		return shim_launcher_run(argc, argv);
	return shim_run(NULL, argc, argv);
}
