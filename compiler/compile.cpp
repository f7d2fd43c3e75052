#include "compiler/compile.h"

namespace weft {

std::optional<plan::ExecutionPlan> CompileAst(const syntax::PlanAst& ast, const model::ModelGraph& graph,
                                              const bind::BindOptions& options, diag::Emitter& diags) {
  std::optional<bind::BoundPlan> bound = bind::Bind(ast, graph, options, diags);
  if (!bound) return std::nullopt;
  return lower::Lower(*bound, graph, diags);
}

}  // namespace weft
