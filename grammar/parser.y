/* parser.y - the grammar of the .net language (see docs/language.md).
 * Actions are one-line constructor calls (compiler/parse.c); the parser
 * recovers from an error at the end of the statement or declaration. */
%code requires {
#include "parse.h"
#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif
#define YYLTYPE nc_loc
#define YYLTYPE_IS_DECLARED 1
}

%code {
#include <string.h>
int yylex(YYSTYPE *lval, YYLTYPE *lloc, yyscan_t scanner);
static void yyerror(YYLTYPE *loc, parse_state *ps, yyscan_t scanner, const char *msg);
#define YYLLOC_DEFAULT(Cur, Rhs, N) ((Cur) = (N) ? YYRHSLOC(Rhs, 1) : YYRHSLOC(Rhs, 0))
#define NODE(k, loc) parse_node(ps, (k), (loc))
}

%define api.pure full
%define parse.error detailed
%locations
%parse-param {parse_state *ps} {yyscan_t scanner}
%lex-param {yyscan_t scanner}

%union {
    int64_t ival;
    double fval;
    char *str;
    nc_dtype dtype;
    ast_node *node;
    ast_list list;
}

%token IMPORT "import" CONFIG "config" FN "fn" MODEL "model" TRAIN "train"
%token PARAM "param" BUFFER "buffer" UPDATE "update" RETURN "return" REPEAT "repeat" AS "as" PRECISION "precision" ASSERT "assert" REQUIRE "require"
%token <ival> INT_LIT "integer" BOOL_LIT "true or false"
%token <fval> FLOAT_LIT "number"
%token <str> NAME "name" STRING_LIT "string" KIND "int, float or string" ATTR "@attribute"
%token <dtype> DTYPE "dtype"
/* statements and conditions known when the model is built: if/else, and/or/not */
%token IF "if" ELSE "else" AND "and" OR "or" NOT "not"
%token NL "end of line" ARROW "->" EQ "==" NE "!=" LE "<=" GE ">=" FLOORDIV "//" WILDCARD "_" ELLIPSIS "..."
%token POW "**"

%type <node> decl import_decl config_item fn_decl model_decl train_decl model_head
%type <node> if_stmt
%type <list> if_chain
%type <node> stmt block expr postfix primary arg type arg_decl
%type <list> decls config_items stmts call_args arg_seq exprs expr_seq arg_decls arg_decl_seq
%type <node> index_item slice_bound
%type <list> index_items
%type <list> model_headers ret_opt dims name_seq

%left OR
%left AND
%precedence NOT
%nonassoc EQ NE '<' LE '>' GE
%left '+' '-'
%left '*' '/' FLOORDIV '@'
%precedence UMINUS
%right POW                          /* tighter than unary minus: -x ** 2 is -(x ** 2) */

%%

program
    : decls                         { ps->decls = $1; }
    ;

decls
    : %empty                        { $$ = (ast_list){0}; }
    | decls decl                    { $$ = $1; if ($2) parse_push(ps, &$$, $2); }
    | decls NL                      { $$ = $1; }
    | decls error NL                { $$ = $1; yyerrok; }
    ;

decl
    : import_decl NL
    | CONFIG config_items NL        { $$ = parse_list(ps, @1, &$2); }
    | fn_decl NL
    | model_decl NL
    | train_decl NL
    ;

import_decl
    : IMPORT NAME                   { $$ = parse_named(ps, AST_IMPORT, @2, $2, NULL, NULL); }
    ;

config_items
    : config_item                   { $$ = (ast_list){0}; parse_push(ps, &$$, $1); }
    | config_items ',' config_item  { $$ = $1; parse_push(ps, &$$, $3); }
    ;

config_item
    : NAME '=' expr                 { $$ = parse_named(ps, AST_CONFIG, @1, $1, $3, NULL); }
    ;

fn_decl
    : FN NAME '(' arg_decls ')' ret_opt block
                                    { $$ = parse_named(ps, AST_FN, @2, $2, NULL, NULL); $$->list2 = $4; $$->list3 = $6; $$->list = $7->list; }
    ;

model_decl
    : model_head model_headers block
                                    { $$ = $1; $$->list4 = $2; $$->list = $3->list; }
    ;

model_head
    : MODEL NAME '(' arg_decls ')' ret_opt
                                    { $$ = parse_named(ps, AST_MODEL, @2, $2, NULL, NULL); $$->list2 = $4; $$->list3 = $6; }
    ;

/* config and precision lines between the signature and the body */
model_headers
    : %empty                        { $$ = (ast_list){0}; }
    | model_headers NL              { $$ = $1; }
    | model_headers CONFIG config_items
                                    { $$ = $1; for (uint32_t i = 0; i < $3.n; i++) parse_push(ps, &$$, $3.items[i]); }
    | model_headers PRECISION DTYPE { $$ = $1; parse_push(ps, &$$, parse_type(ps, @2, true, $3, false, NULL)); }
    ;

train_decl
    : TRAIN NAME block              { $$ = parse_named(ps, AST_TRAIN, @2, $2, NULL, NULL); $$->list = $3->list; }
    | TRAIN NAME '(' arg_decls ')' block
                                    { $$ = parse_named(ps, AST_TRAIN, @2, $2, NULL, NULL); $$->list2 = $4; $$->list = $6->list; }
    ;

ret_opt
    : %empty                        { $$ = (ast_list){0}; }
    | ARROW type                    { $$ = (ast_list){0}; parse_push(ps, &$$, parse_named(ps, AST_ARG, @2, NULL, $2, NULL)); }
    | ARROW '(' arg_decl_seq ')'    { $$ = $3; }
    ;

arg_decls
    : %empty                        { $$ = (ast_list){0}; }
    | arg_decl_seq
    ;

arg_decl_seq
    : arg_decl                      { $$ = (ast_list){0}; parse_push(ps, &$$, $1); }
    | arg_decl_seq ',' arg_decl     { $$ = $1; parse_push(ps, &$$, $3); }
    ;

arg_decl
    : NAME                          { $$ = parse_named(ps, AST_ARG, @1, $1, NULL, NULL); }
    | NAME ':' type                 { $$ = parse_named(ps, AST_ARG, @1, $1, $3, NULL); }
    | NAME '=' expr                 { $$ = parse_named(ps, AST_ARG, @1, $1, NULL, $3); }
    | NAME ':' type '=' expr        { $$ = parse_named(ps, AST_ARG, @1, $1, $3, $5); }
    ;


type
    : DTYPE '[' dims ']'            { $$ = parse_type(ps, @1, true, $1, true, &$3); }
    | DTYPE                         { $$ = parse_type(ps, @1, true, $1, false, NULL); }
    | '[' dims ']'                  { $$ = parse_type(ps, @1, false, NC_F32, true, &$2); }
    | KIND                          { $$ = parse_named(ps, AST_KIND, @1, $1, NULL, NULL); }
    ;

dims
    : %empty                        { $$ = (ast_list){0}; }
    | expr_seq
    ;

block
    : '{' stmts '}'                 { $$ = parse_block(ps, @1, &$2); }
    /* an error on a block's last line recovers at its '}' when the '}' is on that line
       ('{ return x + }'), not at the newline after it, which would leave the block open */
    | '{' stmts error '}'           { yyerrok; $$ = parse_block(ps, @1, &$2); }
    ;

stmts
    : %empty                        { $$ = (ast_list){0}; }
    | stmts stmt NL                 { $$ = $1; if ($2) parse_push(ps, &$$, $2); }
    | stmts NL                      { $$ = $1; }
    | stmts error NL                { $$ = $1; yyerrok; }
    ;

stmt
    : NAME '=' expr                 { $$ = parse_named(ps, AST_LET, @1, $1, $3, NULL); }
    | NAME ',' name_seq '=' expr    { ast_list names = {0};
                                      parse_push(ps, &names, parse_named(ps, AST_NAME, @1, $1, NULL, NULL));
                                      for (uint32_t i = 0; i < $3.n; i++) parse_push(ps, &names, $3.items[i]);
                                      $$ = parse_named(ps, AST_LET, @1, NULL, $5, NULL); $$->list = names; }
    | NAME expr                     { $$ = parse_named(ps, AST_DIRECTIVE, @1, $1, $2, NULL); }
    | PARAM NAME ':' type           { $$ = parse_named(ps, AST_PARAM, @2, $2, $4, NULL); }
    | PARAM NAME ':' type '=' expr  { $$ = parse_named(ps, AST_PARAM, @2, $2, $4, $6); }
    | BUFFER NAME ':' type          { $$ = parse_named(ps, AST_BUFFER, @2, $2, $4, NULL); }
    | BUFFER NAME ':' type '=' expr { $$ = parse_named(ps, AST_BUFFER, @2, $2, $4, $6); }
    | UPDATE NAME '=' expr          { $$ = parse_named(ps, AST_UPDATE, @2, $2, $4, NULL); }
    | RETURN exprs                  { $$ = parse_list(ps, @1, &$2); $$->kind = AST_RETURN; }
    | ASSERT expr ',' expr          { $$ = parse_named(ps, AST_ASSERT, @1, NULL, $2, $4); }
    | ASSERT expr ',' expr ',' expr { $$ = parse_named(ps, AST_ASSERT, @1, NULL, $2, $4); $$->c = $6; }
    | REQUIRE expr ',' expr         { $$ = parse_named(ps, AST_REQUIRE, @1, NULL, $2, $4); }
    | REQUIRE expr ',' expr ',' expr { $$ = parse_named(ps, AST_REQUIRE, @1, NULL, $2, $4); $$->c = $6; }
    | block                         { $$ = $1; }
    | PRECISION DTYPE block         { $$ = $3; $$->loc = @2; $$->has_dtype = true; $$->dtype = $2; }
    | REPEAT expr block             { $$ = parse_named(ps, AST_REPEAT, @1, NULL, $2, NULL); $$->list = $3->list; }
    | REPEAT expr AS NAME block     { $$ = parse_named(ps, AST_REPEAT, @1, $4, $2, NULL); $$->list = $5->list; }
    | REPEAT expr ATTR block        { $$ = parse_with_attr(ps, @3, $3, parse_named(ps, AST_REPEAT, @1, NULL, $2, NULL)); $$->list = $4->list; }
    | REPEAT expr AS NAME ATTR block
                                    { $$ = parse_with_attr(ps, @5, $5, parse_named(ps, AST_REPEAT, @1, $4, $2, NULL)); $$->list = $6->list; }
    | ATTR stmt                     { $$ = parse_with_attr(ps, @1, $1, $2); }
    /* if/else and the loop index: statements that choose or count when the model is built */
    | if_stmt
    | REPEAT expr AS NAME ',' NAME block
                                    { $$ = parse_repeat_index(ps, @1, $2, $4, @6, $6, $7); }
    | REPEAT expr AS NAME ',' NAME ATTR block
                                    { $$ = parse_with_attr(ps, @7, $7, parse_repeat_index(ps, @1, $2, $4, @6, $6, $8)); }
    ;

if_stmt
    : if_chain                      { $$ = parse_if_chain(ps, &$1, NULL); }
    | if_chain ELSE block           { $$ = parse_if_chain(ps, &$1, $3); }
    ;

/* if A { } else if B { } ...: one if a link, gathered left-recursively so
   that a chain of thousands keeps the parser's stack flat */
if_chain
    : IF expr block                 { $$ = (ast_list){0}; parse_push(ps, &$$, parse_if(ps, @1, $2, $3, NULL)); }
    | if_chain ELSE IF expr block   { $$ = $1; parse_push(ps, &$$, parse_if(ps, @3, $4, $5, NULL)); }
    ;

exprs
    : expr_seq
    ;

name_seq
    : NAME                          { $$ = (ast_list){0}; parse_push(ps, &$$, parse_named(ps, AST_NAME, @1, $1, NULL, NULL)); }
    | name_seq ',' NAME             { $$ = $1; parse_push(ps, &$$, parse_named(ps, AST_NAME, @3, $3, NULL, NULL)); }
    ;

expr_seq
    : expr                          { $$ = (ast_list){0}; parse_push(ps, &$$, $1); }
    | expr_seq ',' expr             { $$ = $1; parse_push(ps, &$$, $3); }
    ;

expr
    : expr '+' expr                 { $$ = parse_binary(ps, @2, AST_OP_ADD, $1, $3); }
    | expr '-' expr                 { $$ = parse_binary(ps, @2, AST_OP_SUB, $1, $3); }
    | expr '*' expr                 { $$ = parse_binary(ps, @2, AST_OP_MUL, $1, $3); }
    | expr '/' expr                 { $$ = parse_binary(ps, @2, AST_OP_DIV, $1, $3); }
    | expr FLOORDIV expr            { $$ = parse_binary(ps, @2, AST_OP_FLOORDIV, $1, $3); }
    | expr '@' expr                 { $$ = parse_binary(ps, @2, AST_OP_MATMUL, $1, $3); }
    | expr EQ expr                  { $$ = parse_binary(ps, @2, AST_OP_EQ, $1, $3); }
    | expr NE expr                  { $$ = parse_binary(ps, @2, AST_OP_NE, $1, $3); }
    | expr '<' expr                 { $$ = parse_binary(ps, @2, AST_OP_LT, $1, $3); }
    | expr LE expr                  { $$ = parse_binary(ps, @2, AST_OP_LE, $1, $3); }
    | expr '>' expr                 { $$ = parse_binary(ps, @2, AST_OP_GT, $1, $3); }
    | expr GE expr                  { $$ = parse_binary(ps, @2, AST_OP_GE, $1, $3); }
    | expr POW expr                 { $$ = parse_binary(ps, @2, AST_OP_POW, $1, $3); }
    | '-' expr %prec UMINUS         { $$ = parse_unary(ps, @1, AST_OP_NEG, $2); }
    | expr AND expr                 { $$ = parse_binary(ps, @2, AST_OP_AND, $1, $3); }
    | expr OR expr                  { $$ = parse_binary(ps, @2, AST_OP_OR, $1, $3); }
    | NOT expr                      { $$ = parse_unary(ps, @1, AST_OP_NOT, $2); }
    | postfix
    ;

postfix
    : primary
    | postfix '(' call_args ')'     { $$ = parse_call(ps, $1, &$3); }
    | postfix '.' NAME              { $$ = parse_member(ps, @3, $1, $3); }
    | postfix '[' index_items ']'   { $$ = parse_index(ps, @2, $1, &$3); }
    ;

/* x[i, a:b, ..., :]: an index or a slice per axis */
index_items
    : index_item                    { $$ = (ast_list){0}; parse_push(ps, &$$, $1); }
    | index_items ',' index_item    { $$ = $1; parse_push(ps, &$$, $3); }
    ;

index_item
    : expr
    | slice_bound ':' slice_bound   { $$ = parse_slice(ps, @2, $1, $3, NULL); }
    | slice_bound ':' slice_bound ':' slice_bound
                                    { $$ = parse_slice(ps, @2, $1, $3, $5); }
    ;

slice_bound
    : %empty                        { $$ = NULL; }
    | expr
    ;

primary
    : INT_LIT                       { $$ = NODE(AST_INT, @1); $$->ival = $1; }
    | FLOAT_LIT                     { $$ = NODE(AST_FLOAT, @1); $$->fval = $1; }
    | BOOL_LIT                      { $$ = NODE(AST_BOOL, @1); $$->ival = $1; }
    | STRING_LIT                    { $$ = parse_named(ps, AST_STRING, @1, $1, NULL, NULL); }
    | NAME                          { $$ = parse_named(ps, AST_NAME, @1, $1, NULL, NULL); }
    | DTYPE                         { $$ = NODE(AST_DTYPE, @1); $$->dtype = $1; $$->has_dtype = true; }
    | WILDCARD                      { $$ = NODE(AST_WILDCARD, @1); }
    | ELLIPSIS                      { $$ = NODE(AST_ELLIPSIS, @1); }
    | '(' expr ')'                  { $$ = $2; }
    | '[' dims ']'                  { $$ = parse_list(ps, @1, &$2); }
    ;

call_args
    : %empty                        { $$ = (ast_list){0}; }
    | arg_seq
    ;

arg_seq
    : arg                           { $$ = (ast_list){0}; parse_push(ps, &$$, $1); }
    | arg_seq ',' arg               { $$ = $1; parse_push(ps, &$$, $3); }
    ;

arg
    : expr
    | NAME ':' expr                 { $$ = parse_named(ps, AST_KWARG, @1, $1, $3, NULL); }
    ;

%%

static void yyerror(YYLTYPE *loc, parse_state *ps, yyscan_t scanner, const char *msg)
{
    (void)scanner;
    /* bison says "syntax error, unexpected X, expecting Y"; say it shorter */
    /* bison's own "memory exhausted" is reported once, with a hint, by parse.c */
    if (strcmp(msg, "memory exhausted") == 0) return;
    /* the lexer said why it ended the file: brackets nested too deep */
    if (ps->bracket_depth > AST_MAX_DEPTH) return;
    const char *p = strncmp(msg, "syntax error, ", 14) == 0 ? msg + 14 : msg;
    parse_error(ps, *loc, p);
}
