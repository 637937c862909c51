/* main.c - netc's entry point: the command line (check, build, run, inspect, train) is cli.c's. */
#include "cli.h"

int main(int argc, char **argv) { return cli_main(argc, argv); }
