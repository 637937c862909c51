/* cli.h - the netc command line. */
#ifndef NC_CLI_H
#define NC_CLI_H
int cli_main(int argc, char **argv);
#endif
