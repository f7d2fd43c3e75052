// grammar/plan.schema.json agrees with the JSON reader: every plan in plans/ and every
// clean JSON golden input validates; every failing JSON golden input that is JSON at all is
// rejected. The validator below implements the subset of draft 2020-12 the schema uses
// (type, const, enum, required, properties, additionalProperties: false, items, minItems,
// oneOf, not, local $ref, minimum, maximum, pattern).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "tests/golden/golden_support.h"

namespace weft::golden {
namespace {

using Json = nlohmann::json;

class Validator {
 public:
  explicit Validator(Json schema) : root_(std::move(schema)) {}

  // "" when `value` matches; else the first mismatch with its JSON pointer.
  std::string Validate(const Json& value) const { return Check(value, root_, ""); }

 private:
  const Json& Resolve(const Json& schema) const {
    if (!schema.contains("$ref")) return schema;
    std::string ref = schema["$ref"];
    return root_.at(Json::json_pointer(ref.substr(1)));
  }

  static bool HasType(const Json& value, const std::string& type) {
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    if (type == "string") return value.is_string();
    if (type == "integer") return value.is_number_integer();
    if (type == "boolean") return value.is_boolean();
    return false;
  }

  std::string Check(const Json& value, const Json& schema_in, const std::string& at) const {
    const Json& schema = Resolve(schema_in);
    if (schema.contains("type") && !HasType(value, schema["type"])) return at + ": not " + schema["type"].get<std::string>();
    if (schema.contains("const") && value != schema["const"]) return at + ": not " + schema["const"].dump();
    if (schema.contains("enum")) {
      bool found = false;
      for (const Json& option : schema["enum"]) found |= value == option;
      if (!found) return at + ": not in enum";
    }
    if (schema.contains("minimum") && value.is_number() && value.get<double>() < schema["minimum"].get<double>()) return at + ": below minimum";
    if (schema.contains("maximum") && value.is_number() && value.get<double>() > schema["maximum"].get<double>()) return at + ": above maximum";
    if (schema.contains("pattern") && value.is_string() &&
        !std::regex_search(value.get<std::string>(), std::regex(schema["pattern"].get<std::string>()))) {
      return at + ": does not match " + schema["pattern"].get<std::string>();
    }
    if (schema.contains("not") && Check(value, schema["not"], at).empty()) return at + ": matches `not`";
    if (schema.contains("oneOf")) {
      int matches = 0;
      std::string last;
      for (const Json& option : schema["oneOf"]) {
        std::string error = Check(value, option, at);
        if (error.empty()) ++matches; else last = error;
      }
      if (matches != 1) return at + ": matches " + std::to_string(matches) + " of oneOf (" + last + ")";
    }
    if (value.is_object()) {
      if (schema.contains("required")) {
        for (const Json& key : schema["required"]) {
          if (!value.contains(key.get<std::string>())) return at + ": missing " + key.get<std::string>();
        }
      }
      for (const auto& [key, member] : value.items()) {
        if (schema.contains("properties") && schema["properties"].contains(key)) {
          std::string error = Check(member, schema["properties"][key], at + "/" + key);
          if (!error.empty()) return error;
        } else if (schema.contains("additionalProperties") && schema["additionalProperties"] == false) {
          return at + ": unknown field " + key;
        }
      }
    }
    if (value.is_array()) {
      if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>()) return at + ": too few items";
      if (schema.contains("items")) {
        for (size_t i = 0; i < value.size(); ++i) {
          std::string error = Check(value[i], schema["items"], at + "/" + std::to_string(i));
          if (!error.empty()) return error;
        }
      }
    }
    return "";
  }

  Json root_;
};

Validator LoadSchema() { return Validator(Json::parse(ReadFile(WEFT_SCHEMA_PATH))); }

TEST(PlanSchema, IsDraft202012) {
  Json schema = Json::parse(ReadFile(WEFT_SCHEMA_PATH));
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
}

TEST(PlanSchema, AcceptsEveryPlanAndCleanGoldenInput) {
  Validator validator = LoadSchema();
  std::vector<std::string> files = ListFiles(WEFT_PLANS_DIR, {".json"});
  for (const std::string& path : ListFiles(WEFT_GOLDEN_DIR, {".json"})) {
    if (std::filesystem::path(path).filename().string().rfind("fail_", 0) != 0) files.push_back(path);
  }
  ASSERT_FALSE(files.empty());
  for (const std::string& path : files) {
    EXPECT_EQ(validator.Validate(Json::parse(ReadFile(path))), "") << path;
  }
}

TEST(PlanSchema, RejectsEveryFailingGoldenInputThatIsJson) {
  Validator validator = LoadSchema();
  size_t checked = 0;
  for (const std::string& path : ListFiles(WEFT_GOLDEN_DIR, {".json"})) {
    if (std::filesystem::path(path).filename().string().rfind("fail_", 0) != 0) continue;
    Json doc = Json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) continue;  // a JSON syntax case
    ++checked;
    EXPECT_NE(validator.Validate(doc), "") << path << " is rejected by the reader but valid by the schema";
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace weft::golden
