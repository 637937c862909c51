/* main.c - the netc command line: check, build (and, later, run, inspect, train). */
#include "cli.h"

int main(int argc, char **argv) { return cli_main(argc, argv); }
