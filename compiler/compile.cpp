#include "compiler/compile.h"
