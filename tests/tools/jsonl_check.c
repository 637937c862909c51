/* jsonl_check FILE - whether every line of a JSON-lines file (netc train
 * --metrics) is a whole JSON object ending in a newline: a run stopped
 * mid-write leaves a torn last line. Says the first bad line; exit 0 or 1. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: jsonl_check FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    long n = 0, bad = 0;
    while (!bad) {
        int c = 0;
        size_t len = 0;
        while ((c = fgetc(f)) != EOF && c != '\n') {
            if (len + 2 > cap) line = realloc(line, cap = cap * 2 + 256);
            line[len++] = (char)c;
        }
        if (c == EOF && len == 0) break;
        n++;
        if (!line) line = calloc(1, 1);
        line[len] = 0;
        json_error_t e;
        json_t *o = json_loads(line, 0, &e);
        if (c == EOF) fprintf(stderr, "%s:%ld: no newline at the end (a torn line)\n", argv[1], n), bad = 1;
        else if (!o) fprintf(stderr, "%s:%ld: %s\n", argv[1], n, e.text), bad = 1;
        else if (!json_is_object(o)) fprintf(stderr, "%s:%ld: not an object\n", argv[1], n), bad = 1;
        json_decref(o);
    }
    free(line);
    fclose(f);
    if (!bad) printf("%ld lines\n", n);
    return bad ? 1 : 0;
}
