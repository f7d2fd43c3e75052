// The weft plan language (DSL surface form). One file, one plan:
//
//   plan <name> for <ModelClass>
//   context_parallel { split/gather/attention rules }
//   tensor_parallel  { colwise/rowwise/replicate rules }
//   guidance_parallel { split/gather rules over the cfg axis: the batch of guidance branches;
//                       or `calls "" { args }`: each branch a forward call of its own }
//
// The grammar is deliberately permissive in a few places ("error alternatives": an unknown
// word where a keyword belongs, `=` before a value, a string missing its closing quote) so
// that the parser recovers at statement boundaries and compiler/syntax can report a
// targeted diagnostic ("did you mean `colwise`?") instead of a generic syntax error. The
// vocabulary check and every message live in C++ (compiler/syntax/ast_builder.cpp); this
// file stays language-neutral. plans/README.md shows the language by example.
grammar WeftPlan;

plan : header section* EOF ;

// `badFor`: a misspelled `for` (`plan flux fro Model`).
header : PLAN name=IDENT (FOR | badFor=IDENT) model=IDENT ;

section
  : CONTEXT_PARALLEL LBRACE cpStatement* RBRACE        # contextParallelSection
  | TENSOR_PARALLEL LBRACE tpStatement* RBRACE         # tensorParallelSection
  | GUIDANCE_PARALLEL LBRACE cpStatement* RBRACE       # guidanceParallelSection
  | unknown=IDENT LBRACE skipped* RBRACE               # unknownSection
  ;

// ---- context_parallel ------------------------------------------------------------------
cpStatement
  : SPLIT pattern shardBody                            # splitStatement
  | GATHER pattern shardBody                           # gatherStatement
  | ATTENTION pattern attnMode=word                        # attentionStatement
  | CALLS pattern shardBody                            # callsStatement
  | unknown=IDENT pattern? junk*                       # unknownCpStatement
  ;

// One item inline, or several in braces.
shardBody : shardItem | LBRACE shardItem* RBRACE ;

// What to split or gather, then its fields (`dim N`, `rank N`, `optional`, in any order).
shardItem : target EQ? field* ;

target
  : OUTPUT EQ? index=INT                               # outputTarget
  | badOutput=IDENT index=INT                          # misspelledOutputTarget
  | arg=IDENT LBRACKET index=INT RBRACKET              # elementTarget
  | arg=IDENT                                          # argumentTarget
  ;

field
  : DIM EQ? value=INT                                  # dimField
  | RANK EQ? value=INT                                 # rankField
  | OPTIONAL                                           # optionalField
  | unknown=IDENT EQ? value=INT                        # unknownField
  ;

// ---- tensor_parallel -------------------------------------------------------------------
tpStatement
  : style=(COLWISE | ROWWISE | REPLICATE) pattern packed? OPTIONAL?   # styleStatement
  | unknown=IDENT pattern? junk*                             # unknownTpStatement
  ;

packed : PACKED EQ? LBRACKET (blockSize (COMMA blockSize)* COMMA?)? RBRACKET ;

blockSize : INT | IDENT ;

// ---- shared ----------------------------------------------------------------------------
pattern : STRING | UNTERMINATED_STRING | SINGLE_QUOTED ;

word
  : IDENT | PLAN | FOR | CONTEXT_PARALLEL | TENSOR_PARALLEL | GUIDANCE_PARALLEL | SPLIT | GATHER | ATTENTION | CALLS
  | OUTPUT | DIM | RANK | OPTIONAL | PACKED | COLWISE | ROWWISE | REPLICATE | LOCAL
  ;

// The tail of an unknown statement: everything up to the next statement keyword or word.
junk
  : INT | STRING | UNTERMINATED_STRING | SINGLE_QUOTED | OUTPUT | DIM | RANK | OPTIONAL | PACKED | LOCAL
  | LBRACKET | RBRACKET | COMMA | EQ | LBRACE skipped* RBRACE
  ;

// The body of an unknown section: balanced braces around anything.
skipped : ~(LBRACE | RBRACE) | LBRACE skipped* RBRACE ;

// ---- tokens ----------------------------------------------------------------------------
PLAN : 'plan' ;
FOR : 'for' ;
CONTEXT_PARALLEL : 'context_parallel' ;
TENSOR_PARALLEL : 'tensor_parallel' ;
GUIDANCE_PARALLEL : 'guidance_parallel' ;
SPLIT : 'split' ;
GATHER : 'gather' ;
ATTENTION : 'attention' ;
CALLS : 'calls' ;
OUTPUT : 'output' ;
DIM : 'dim' ;
RANK : 'rank' ;
OPTIONAL : 'optional' ;
PACKED : 'packed' ;
COLWISE : 'colwise' ;
ROWWISE : 'rowwise' ;
REPLICATE : 'replicate' ;
LOCAL : 'local' ;

LBRACE : '{' ;
RBRACE : '}' ;
LBRACKET : '[' ;
RBRACKET : ']' ;
COMMA : ',' ;
EQ : '=' ;

INT : [0-9]+ ;
IDENT : [A-Za-z_] [A-Za-z0-9_]* ;
// A pattern: module-path glob between double quotes, on one line.
STRING : '"' ~["\r\n]* '"' ;
// The same without its closing quote, up to the next blank (patterns hold no blanks), so
// the rest of the line still parses. Longest match prefers STRING when the quote is there.
UNTERMINATED_STRING : '"' ~["\r\n \t]* ;

// A pattern in single quotes: diagnosed, but read, so the rest of the rule still parses.
SINGLE_QUOTED : '\'' ~['\r\n]* '\'' ;

COMMENT : '#' ~[\r\n]* -> channel(HIDDEN) ;
WS : [ \t\r\n]+ -> skip ;
// Any other character; kept off the parser's channel and reported by the token scan.
ERROR_CHAR : . -> channel(2) ;
