#pragma once

// weft::compiler: the plan compiler behind one header. The pipeline is
// Parse -> PlanAst -> Bind -> BoundPlan -> Lower -> ExecutionPlan; each phase is declared
// in its layer's public header and joined here.

#include "compiler/source/version.h"
