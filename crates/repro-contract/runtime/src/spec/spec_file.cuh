// ---------------------------------------------------------------------------------------------
// repro runtime: reading the artifact's spec.yaml at run time
//
// Inits, seeds, tolerances, repeats, timeouts, the reference and its provider, and the sizes are
// not compiled into harness.cu: the runtime reads them here, so that editing them re-runs at once
// with no nvcc call. spec.yaml is the resolved spec repro writes (every input's init spelled
// out), and this reader takes the block YAML repro writes plus what a person editing it by hand
// is likely to write: block mappings and sequences, one-line flow collections (`[1, 2]`,
// `{ file: a.npy }`), plain and quoted scalars, `|` and `>` block scalars (skipped over), and
// comments. Anything else is an error with the line, never a guess.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "output_order.cuh"
#include "spec_info.cuh"

namespace repro {

// spec.yaml cannot be used as it is: exit 2.
[[noreturn]] inline void spec_file_error(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  exit_now(kExitUsage);
}

struct YamlNode {
  enum class Kind { null, scalar, map, seq } kind = Kind::null;
  std::string text;  // scalar
  std::vector<std::pair<std::string, YamlNode>> entries;  // map, in file order
  std::vector<YamlNode> items;                            // seq
  int line = 0;

  const YamlNode* get(const std::string& key) const {
    for (const auto& entry : entries)
      if (entry.first == key) return &entry.second;
    return nullptr;
  }
};

class YamlReader {
 public:
  YamlReader(const std::string& path, const std::string& text) : path_(path) {
    size_t begin = 0;
    int number = 1;
    while (begin <= text.size()) {
      size_t end = text.find('\n', begin);
      if (end == std::string::npos) end = text.size();
      std::string raw = text.substr(begin, end - begin);
      if (!raw.empty() && raw.back() == '\r') raw.pop_back();
      lines_.push_back(Line{number++, raw, 0, ""});
      begin = end + 1;
    }
    for (Line& l : lines_) {
      size_t indent = 0;
      while (indent < l.raw.size() && l.raw[indent] == ' ') ++indent;
      if (indent < l.raw.size() && l.raw[indent] == '\t') fail(l.number, "a tab in the indentation (YAML indents with spaces)");
      l.indent = int(indent);
      l.content = trim(strip_comment(l.raw.substr(indent)));
    }
  }

  YamlNode document() {
    skip_blank();
    if (at_ >= lines_.size()) return YamlNode{};
    if (lines_[at_].content == "---") {
      ++at_;
      skip_blank();
    }
    YamlNode root = block(lines_[at_].indent);
    skip_blank();
    if (at_ < lines_.size()) fail(lines_[at_].number, "unexpected indentation");
    return root;
  }

  [[noreturn]] void fail(int line, const std::string& message) const {
    std::fprintf(stderr, "error: %s:%d: %s\n", path_.c_str(), line, message.c_str());
    exit_now(kExitUsage);
  }

 private:
  struct Line {
    int number;
    std::string raw;
    int indent;
    std::string content;  // without indentation and comment
  };

  std::string path_;
  std::vector<Line> lines_;
  size_t at_ = 0;

  static std::string trim(const std::string& s) {
    size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
    return s.substr(a, b - a);
  }

  // A `#` starts a comment at the line's start or after a space, outside quotes.
  static std::string strip_comment(const std::string& s) {
    char quote = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '#' && (i == 0 || s[i - 1] == ' ')) {
        return s.substr(0, i);
      }
    }
    return s;
  }

  void skip_blank() {
    while (at_ < lines_.size() && lines_[at_].content.empty()) ++at_;
  }

  static bool is_item(const std::string& content) {
    return content == "-" || content.rfind("- ", 0) == 0;
  }

  // The position of the `:` that ends a mapping key (followed by a space or the line's end),
  // outside quotes and brackets; npos when the text is no `key: value`.
  static size_t key_colon(const std::string& s) {
    char quote = 0;
    int depth = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        if (i == 0) quote = c;
      } else if (c == '[' || c == '{') {
        if (i == 0) return std::string::npos;  // a flow collection, not a key
        ++depth;
      } else if (c == ']' || c == '}') {
        --depth;
      } else if (c == ':' && depth == 0 && (i + 1 == s.size() || s[i + 1] == ' ')) {
        return i;
      }
    }
    return std::string::npos;
  }

  // The block starting at the current line, whose lines are indented `indent`.
  YamlNode block(int indent) {
    skip_blank();
    const Line& first = lines_[at_];
    return is_item(first.content) ? sequence(indent) : mapping(indent);
  }

  YamlNode mapping(int indent) {
    YamlNode node;
    node.kind = YamlNode::Kind::map;
    node.line = lines_[at_].number;
    while (true) {
      skip_blank();
      if (at_ >= lines_.size() || lines_[at_].indent < indent) break;
      Line& l = lines_[at_];
      if (l.indent > indent) fail(l.number, "unexpected indentation");
      if (is_item(l.content)) break;
      const size_t colon = key_colon(l.content);
      if (colon == std::string::npos) fail(l.number, strprintf("expected `key: value`, found `%s`", l.content.c_str()));
      const std::string key = unquote(trim(l.content.substr(0, colon)), l.number);
      const std::string rest = trim(l.content.substr(colon + 1));
      const int number = l.number;
      ++at_;
      YamlNode value;
      if (rest.empty()) {
        skip_blank();
        if (at_ < lines_.size() && lines_[at_].indent > indent) {
          value = block(lines_[at_].indent);
        } else if (at_ < lines_.size() && lines_[at_].indent == indent && is_item(lines_[at_].content)) {
          value = sequence(indent);  // `key:` then `- item` at the key's own indentation
        }
        value.line = value.line ? value.line : number;
      } else if (rest[0] == '|' || rest[0] == '>') {
        value = block_scalar(indent, number);
      } else {
        value = flow(rest, number);
      }
      node.entries.emplace_back(key, std::move(value));
    }
    return node;
  }

  YamlNode sequence(int indent) {
    YamlNode node;
    node.kind = YamlNode::Kind::seq;
    node.line = lines_[at_].number;
    while (true) {
      skip_blank();
      if (at_ >= lines_.size() || lines_[at_].indent != indent || !is_item(lines_[at_].content)) break;
      Line& l = lines_[at_];
      const std::string rest = l.content == "-" ? "" : trim(l.content.substr(2));
      if (rest.empty()) {
        ++at_;
        skip_blank();
        if (at_ < lines_.size() && lines_[at_].indent > indent) node.items.push_back(block(lines_[at_].indent));
        else node.items.push_back(YamlNode{});
      } else if (key_colon(rest) != std::string::npos || is_item(rest)) {
        // `- key: value` opens a mapping (or `- - x` a sequence) whose lines are indented like
        // the text after the dash: read this line again as such.
        l.indent = indent + int(l.content.size() - rest.size());
        l.content = rest;
        node.items.push_back(block(l.indent));
      } else if (rest[0] == '|' || rest[0] == '>') {
        ++at_;
        node.items.push_back(block_scalar(indent, l.number));
      } else {
        ++at_;
        node.items.push_back(flow(rest, l.number));
      }
    }
    return node;
  }

  // `|` or `>`: the lines indented deeper than the key. Their text is kept for `|` (nothing the
  // runtime reads is a block scalar: prelude, setup).
  YamlNode block_scalar(int indent, int number) {
    YamlNode node;
    node.kind = YamlNode::Kind::scalar;
    node.line = number;
    while (at_ < lines_.size() && (lines_[at_].content.empty() || lines_[at_].indent > indent)) {
      node.text += lines_[at_].raw + "\n";
      ++at_;
    }
    return node;
  }

  std::string unquote(const std::string& s, int line) const {
    if (s.size() >= 2 && s[0] == '\'' && s.back() == '\'') {
      std::string out;
      for (size_t i = 1; i + 1 < s.size(); ++i) {
        out += s[i];
        if (s[i] == '\'' && s[i + 1] == '\'') ++i;
      }
      return out;
    }
    if (s.size() >= 2 && s[0] == '"' && s.back() == '"') {
      std::string out;
      for (size_t i = 1; i + 1 < s.size(); ++i) {
        if (s[i] != '\\') {
          out += s[i];
          continue;
        }
        const char e = s[++i];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case '0': out += '\0'; break;
          case '\\': out += '\\'; break;
          case '"': out += '"'; break;
          case '/': out += '/'; break;
          case 'x': {
            if (i + 2 >= s.size()) fail(line, "a \\x escape needs two hex digits");
            out += char(std::strtol(s.substr(i + 1, 2).c_str(), nullptr, 16));
            i += 2;
            break;
          }
          default: out += '\\', out += e;  // kept as written: nothing the runtime reads uses it
        }
      }
      return out;
    }
    if (!s.empty() && (s[0] == '\'' || s[0] == '"')) fail(line, "an unterminated quoted string");
    return s;
  }

  // A one-line value: a scalar, `[a, b]` or `{k: v}`, nested.
  YamlNode flow(const std::string& text, int line) {
    if (text[0] != '[' && text[0] != '{' && text[0] != '\'' && text[0] != '"') {
      // A plain scalar outside a flow collection: commas and brackets are its own.
      YamlNode node;
      node.kind = text == "~" || text == "null" ? YamlNode::Kind::null : YamlNode::Kind::scalar;
      node.text = text;
      node.line = line;
      return node;
    }
    size_t at = 0;
    YamlNode node = flow_value(text, at, line);
    while (at < text.size() && text[at] == ' ') ++at;
    if (at != text.size()) fail(line, strprintf("unexpected `%s` after the value", text.substr(at).c_str()));
    return node;
  }

  YamlNode flow_value(const std::string& s, size_t& at, int line) {
    while (at < s.size() && s[at] == ' ') ++at;
    YamlNode node;
    node.line = line;
    if (at < s.size() && (s[at] == '[' || s[at] == '{')) {
      const bool is_map = s[at] == '{';
      const char close = is_map ? '}' : ']';
      node.kind = is_map ? YamlNode::Kind::map : YamlNode::Kind::seq;
      ++at;
      while (true) {
        while (at < s.size() && s[at] == ' ') ++at;
        if (at >= s.size()) fail(line, strprintf("a flow collection without its `%c` (repro reads flow collections on one line)", close));
        if (s[at] == close) {
          ++at;
          return node;
        }
        if (is_map) {
          const size_t colon = flow_key_end(s, at);
          if (colon == std::string::npos) fail(line, "expected `key: value` in `{...}`");
          const std::string key = unquote(trim(s.substr(at, colon - at)), line);
          at = colon + 1;
          node.entries.emplace_back(key, flow_value(s, at, line));
        } else {
          node.items.push_back(flow_value(s, at, line));
        }
        while (at < s.size() && s[at] == ' ') ++at;
        if (at < s.size() && s[at] == ',') ++at;
        else if (at >= s.size() || s[at] != close) fail(line, strprintf("expected `,` or `%c`", close));
      }
    }
    node.kind = YamlNode::Kind::scalar;
    const size_t begin = at;
    if (at < s.size() && (s[at] == '\'' || s[at] == '"')) {
      const char quote = s[at++];
      while (at < s.size()) {
        if (s[at] == '\\' && quote == '"') at += 2;
        else if (s[at] == quote && quote == '\'' && at + 1 < s.size() && s[at + 1] == '\'') at += 2;
        else if (s[at] == quote) break;
        else ++at;
      }
      if (at >= s.size()) fail(line, "an unterminated quoted string");
      ++at;
      node.text = unquote(s.substr(begin, at - begin), line);
      return node;
    }
    // A plain scalar ends at a `,`, `]` or `}` of an enclosing flow collection.
    int depth = 0;
    while (at < s.size()) {
      const char c = s[at];
      if (c == '(' || c == '<') ++depth;
      else if ((c == ')' || c == '>') && depth > 0) --depth;
      else if (depth == 0 && (c == ',' || c == ']' || c == '}')) break;
      ++at;
    }
    node.text = trim(s.substr(begin, at - begin));
    if (node.text == "~" || node.text == "null") node.kind = YamlNode::Kind::null;
    return node;
  }

  static size_t flow_key_end(const std::string& s, size_t at) {
    for (size_t i = at; i < s.size(); ++i) {
      if (s[i] == ':' && (i + 1 == s.size() || s[i + 1] == ' ')) return i;
      if (s[i] == ',' || s[i] == '}') return std::string::npos;
    }
    return std::string::npos;
  }
};

// The values of spec.yaml the run reads, checked as they are read. A wrong value names its line.
class SpecFile {
 public:
  SpecFile(const std::string& path, const std::string& text) : reader_(path, text), root_(reader_.document()) {
    if (root_.kind != YamlNode::Kind::map) reader_.fail(root_.line ? root_.line : 1, "spec.yaml is no mapping");
  }

  const YamlNode* section(const char* key) const { return root_.get(key); }

  const YamlNode& require(const YamlNode& map, const char* key, const char* where) const {
    const YamlNode* v = map.kind == YamlNode::Kind::map ? map.get(key) : nullptr;
    if (v == nullptr) reader_.fail(map.line, strprintf("%s has no `%s`", where, key));
    return *v;
  }

  std::string text(const YamlNode& v, const char* what) const {
    if (v.kind != YamlNode::Kind::scalar) reader_.fail(v.line, strprintf("%s must be a single value", what));
    return v.text;
  }

  double number(const YamlNode& v, const char* what) const {
    const std::string t = text(v, what);
    char* end = nullptr;
    const double x = std::strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0') {
      if (t == ".nan" || t == ".NaN") return std::numeric_limits<double>::quiet_NaN();
      reader_.fail(v.line, strprintf("%s must be a number, not `%s`", what, t.c_str()));
    }
    return x;
  }

  int64_t integer(const YamlNode& v, const char* what) const {
    const double x = number(v, what);
    if (x != std::floor(x) || std::fabs(x) > 9.0e15)
      reader_.fail(v.line, strprintf("%s must be an integer, not `%s`", what, v.text.c_str()));
    return int64_t(x);
  }

  std::vector<double> numbers(const YamlNode& v, const char* what) const {
    if (v.kind != YamlNode::Kind::seq) reader_.fail(v.line, strprintf("%s must be a list of numbers", what));
    std::vector<double> out;
    for (const YamlNode& item : v.items) out.push_back(number(item, what));
    return out;
  }

  [[noreturn]] void fail(const YamlNode& v, const std::string& message) const { reader_.fail(v.line, message); }

 private:
  YamlReader reader_;
  YamlNode root_;
};

inline int tensor_index(const SpecInfo& spec, const SpecFile& file, const YamlNode& v, const char* what) {
  const std::string name = file.text(v, what);
  for (size_t i = 0; i < spec.tensors.size(); ++i)
    if (spec.tensors[i].name == name) return int(i);
  file.fail(v, strprintf("%s names `%s`, which is not one of the harness's tensors (rebuild after adding a tensor)",
                         what, name.c_str()));
}

// A tensor's init from its `init`, `range`, `mean`, `std` and `seed`.
inline Init read_init(const SpecFile& file, const YamlNode& tensor, const std::string& name) {
  const std::string where = "tensors." + name;
  const YamlNode& init = file.require(tensor, "init", where.c_str());
  Init out;
  if (init.kind == YamlNode::Kind::map) {
    if (const YamlNode* values = init.get("values")) {
      out.kind = InitKind::values;
      out.values = file.numbers(*values, "init.values");
    } else if (const YamlNode* groups = init.get("groups")) {
      out.kind = InitKind::groups;
      out.values = file.numbers(*groups, "init.groups");
      if (const YamlNode* align = init.get("align")) out.align = file.integer(*align, "init.align");
      if (out.align < 1) file.fail(init, where + ".init.align must be 1 or more");
    } else {
      out.kind = InitKind::file;
      out.path = file.text(file.require(init, "file", (where + ".init").c_str()), "init.file");
    }
    return out;
  }
  const std::string pattern = file.text(init, "init");
  bool known = false;
  for (const InitForm& form : kInitPatterns)
    if (pattern == form.name) out.kind = form.kind, known = true;
  if (!known)
    file.fail(init, strprintf("%s.init: `%s` is no init pattern (%s, or { file: PATH })", where.c_str(),
                              pattern.c_str(), kInitNames));
  if (const YamlNode* range = tensor.get("range")) {
    const std::vector<double> r = file.numbers(*range, "range");
    if (r.size() != 2) file.fail(*range, where + ".range takes [lo, hi]");
    out.p0 = r[0], out.p1 = r[1];
  }
  if (out.kind == InitKind::normal) {
    out.p0 = 0, out.p1 = 1;
    if (const YamlNode* mean = tensor.get("mean")) out.p0 = file.number(*mean, "mean");
    if (const YamlNode* std_dev = tensor.get("std")) out.p1 = file.number(*std_dev, "std");
  }
  if (const YamlNode* seed = tensor.get("seed")) {
    const int64_t s = file.integer(*seed, "seed");
    if (s < 0) file.fail(*seed, "seed must not be negative");
    out.seed = uint64_t(s);
  }
  return out;
}

// reference: op: gemm or grouped_gemm: the operands, block scales, the grouped layout, scalars.
inline void read_gemm_reference(const SpecFile& file, const YamlNode& reference_node, const std::string& op,
                                SpecInfo* spec) {
  const YamlNode* reference = &reference_node;
  GemmOperands& g = spec->gemm;
  g.a = tensor_index(*spec, file, file.require(*reference, "a", "reference"), "reference.a");
  g.b = tensor_index(*spec, file, file.require(*reference, "b", "reference"), "reference.b");
  g.out = tensor_index(*spec, file, file.require(*reference, "out", "reference"), "reference.out");
  for (int is_a = 1; is_a >= 0; --is_a) {
    const char* field = is_a ? "scale_a" : "scale_b";
    const YamlNode* scale = reference->get(field);
    if (scale == nullptr) continue;
    ScaleSpec& s = is_a ? g.scale_a : g.scale_b;
    s.tensor = tensor_index(*spec, file, file.require(*scale, "tensor", field), field);
    const std::vector<double> block = file.numbers(file.require(*scale, "block", field), "block");
    if (block.size() != 2 || !(block[0] >= 1) || !(block[1] >= 1)) file.fail(*scale, strprintf("reference.%s.block takes two positive extents", field));
    s.block[0] = int64_t(block[0]), s.block[1] = int64_t(block[1]);
    std::string format = "f32";
    if (const YamlNode* f = scale->get("format")) format = file.text(*f, "format");
    if (format == "ue8m0") {
      const DType dtype = spec->tensors[size_t(s.tensor)].dtype;
      s.encoding = dtype == DType::u8 ? ScaleEncoding::ue8m0 : ScaleEncoding::ue8m0_packed;
    } else if (format != "f32") {
      file.fail(*scale, strprintf("reference.%s.format takes f32 or ue8m0", field));
    }
    spec->tensors[size_t(s.tensor)].scale_tensor = true;
  }
  if (op == "grouped_gemm") {
    const std::string layout = file.text(file.require(*reference, "layout", "reference"), "reference.layout");
    const char* field = layout == "contiguous" ? "group_index" : layout == "masked" ? "masked_m" : "k_sizes";  // and both k_grouped
    g.grouped = layout == "contiguous" ? GroupedLayout::contiguous
                : layout == "masked"   ? GroupedLayout::masked
                : layout == "k_grouped" ? GroupedLayout::k_grouped
                : layout == "k_grouped_blocks" ? GroupedLayout::k_grouped_blocks
                                        : GroupedLayout::none;
    if (g.grouped == GroupedLayout::none)
      file.fail(*reference, "reference.layout takes contiguous, masked, k_grouped or k_grouped_blocks");
    g.group_metadata = tensor_index(*spec, file, file.require(*reference, field, "reference"), field);
  }
  if (const YamlNode* c = reference->get("c")) g.c = tensor_index(*spec, file, *c, "reference.c");
  if (const YamlNode* bias = reference->get("bias")) g.bias = tensor_index(*spec, file, *bias, "reference.bias");
  if (const YamlNode* alpha = reference->get("alpha")) g.alpha = file.number(*alpha, "reference.alpha");
  if (const YamlNode* beta = reference->get("beta")) g.beta = file.number(*beta, "reference.beta");
  if (const YamlNode* accumulate = reference->get("accumulate")) {
    const std::string v = file.text(*accumulate, "reference.accumulate");
    if (v != "true" && v != "false" && v != "True" && v != "False")
      file.fail(*accumulate, "reference.accumulate takes true or false");
    g.accumulate = v == "true" || v == "True";
  }
  if (const YamlNode* tile = reference->get("tile")) {
    const std::vector<double> t = file.numbers(*tile, "reference.tile");
    if (t.size() < 2 || t.size() > 3) file.fail(*tile, "reference.tile takes [tile_m, tile_n] or [tile_m, tile_n, tile_k]");
    spec->tile_m = int64_t(t[0]), spec->tile_n = int64_t(t[1]), spec->tile_k = t.size() == 3 ? int64_t(t[2]) : 0;
  }
}

// reference.upstream (op: custom): `{ Y: [Mean, Rstd] }`, each output and the outputs it is
// computed from, as positions in CustomOperands::outputs (output_order.cuh).
inline void read_upstream(const SpecFile& file, const YamlNode& upstream, SpecInfo* spec) {
  CustomOperands& c = spec->custom;
  if (upstream.kind != YamlNode::Kind::map)
    file.fail(upstream, "reference.upstream maps an output to the outputs it is computed from: { Y: [Mean, Rstd] }");
  const auto output_position = [&](const YamlNode& node, const std::string& name) {
    const int index = tensor_index(*spec, file, YamlNode{YamlNode::Kind::scalar, name, {}, {}, node.line},
                                   "reference.upstream");
    const auto at = std::find(c.outputs.begin(), c.outputs.end(), index);
    if (at == c.outputs.end()) file.fail(node, "reference.upstream: `" + name + "` is an input, not an output");
    return int(at - c.outputs.begin());
  };
  for (const auto& entry : upstream.entries) {
    const int k = output_position(entry.second, entry.first);
    if (entry.second.kind != YamlNode::Kind::seq || entry.second.items.empty())
      file.fail(entry.second, "reference.upstream." + entry.first + " lists the outputs it is computed from");
    for (const YamlNode& item : entry.second.items) {
      const int u = output_position(item, file.text(item, "reference.upstream"));
      if (u == k) file.fail(item, "reference.upstream: `" + entry.first + "` cannot be its own upstream");
      c.upstream[size_t(k)].push_back(u);
    }
  }
  if (upstream_order(c.upstream).empty())
    file.fail(upstream, "reference.upstream goes round in a circle: an output's upstream are computed before it");
}

// reference: op: custom (the harness's custom_reference) or op: file (`expected:` .npy per
// output). Every output is judged; `block` localizes their errors as a GEMM's tile does.
inline void read_custom_reference(const SpecFile& file, const YamlNode& reference, const std::string& op,
                                  SpecInfo* spec) {
  CustomOperands& c = spec->custom;
  c.op = op == "custom" ? ReferenceOp::custom : op == "file" ? ReferenceOp::file : ReferenceOp::attention;  // and attention_backward
  if (c.op == ReferenceOp::custom && spec->harness->custom_reference == nullptr)
    file.fail(reference, "reference.op is `custom`, but this harness was built without a custom reference: rebuild "
                         "it (repro build, or ./build.sh) after changing the op");
  for (size_t i = 0; i < spec->tensors.size(); ++i)
    if (spec->tensors[i].output) c.outputs.push_back(int(i));
  c.expected.assign(c.outputs.size(), "");
  c.upstream.assign(c.outputs.size(), {});
  if (const YamlNode* upstream = reference.get("upstream")) {
    if (c.op != ReferenceOp::custom) file.fail(*upstream, "reference.upstream belongs to op: custom");
    read_upstream(file, *upstream, spec);
  }
  if (const YamlNode* block = reference.get("block")) {
    const std::vector<double> b = file.numbers(*block, "reference.block");
    if (b.empty() || b.size() > 2) file.fail(*block, "reference.block takes one or two positive extents");
    for (double v : b)
      if (!(v >= 1) || v != std::floor(v)) file.fail(*block, "reference.block takes positive integer extents");
    for (double v : b) c.block.push_back(int64_t(v));
  }
  if (c.op == ReferenceOp::attention) {
    AttentionOperands& a = c.attention;
    // reference.<field> names a tensor: its index, or -1 when an optional field is not given.
    const auto tensor_field = [&](const char* field, bool required) {
      const YamlNode* node = required ? &file.require(reference, field, "reference") : reference.get(field);
      return node == nullptr ? -1 : tensor_index(*spec, file, *node, (std::string("reference.") + field).c_str());
    };
    a.q = tensor_field("q", true), a.k = tensor_field("k", true), a.v = tensor_field("v", true);
    if (op == "attention_backward") {
      a.out = tensor_field("o", true), a.lse = tensor_field("lse", true), a.d_out = tensor_field("do", true);
      a.dq = tensor_field("dq", true), a.dk = tensor_field("dk", true), a.dv = tensor_field("dv", true);
    } else {
      a.out = tensor_field("out", true), a.lse = tensor_field("lse", false);
    }
    a.cu_seqlens_q = tensor_field("cu_seqlens_q", false), a.cu_seqlens_k = tensor_field("cu_seqlens_k", false);
    if ((a.cu_seqlens_q < 0) != (a.cu_seqlens_k < 0))
      file.fail(reference, "reference: variable lengths need both cu_seqlens_q and cu_seqlens_k");
    if (const YamlNode* causal = reference.get("causal")) {
      const std::string mode = file.text(*causal, "reference.causal");
      if (mode == "none") a.causal = 0;
      else if (mode == "top_left") a.causal = 1;
      else if (mode == "bottom_right") a.causal = 2;
      else file.fail(*causal, "reference.causal takes none, top_left or bottom_right");
    }
    if (const YamlNode* scale = reference.get("softmax_scale")) {
      a.softmax_scale = file.number(*scale, "reference.softmax_scale");
      if (!(a.softmax_scale > 0)) file.fail(*scale, "reference.softmax_scale is a positive number");
    }
    const int given[] = {a.q, a.k, a.v};
    for (int index : given)
      if (spec->tensors[size_t(index)].output) file.fail(reference, "reference: q, k and v are inputs");
    for (size_t i = 0; i < spec->tensors.size(); ++i) {
      const int t = int(i);
      const bool judged = a.backward() ? (t == a.dq || t == a.dk || t == a.dv) : (t == a.out || t == a.lse);
      if (spec->tensors[i].output != judged)
        file.fail(reference, strprintf("reference: `%s` %s", spec->tensors[i].name.c_str(),
                                       judged ? "is judged as an output: mark it `output: true`"
                                              : "is an output the reference does not judge"));
    }
  }
  if (c.op == ReferenceOp::file) {
    const YamlNode& expected = file.require(reference, "expected", "reference");
    if (expected.kind != YamlNode::Kind::map) file.fail(expected, "reference.expected maps each output to a .npy file");
    for (const auto& entry : expected.entries) {
      const int index = tensor_index(*spec, file, YamlNode{YamlNode::Kind::scalar, entry.first, {}, {}, entry.second.line},
                                     "reference.expected");
      const auto at = std::find(c.outputs.begin(), c.outputs.end(), index);
      if (at == c.outputs.end()) file.fail(entry.second, strprintf("reference.expected.%s: `%s` is an input, not an output", entry.first.c_str(), entry.first.c_str()));
      c.expected[size_t(at - c.outputs.begin())] = join_path(spec->base_dir, file.text(entry.second, "reference.expected"));
    }
    for (size_t k = 0; k < c.outputs.size(); ++k)
      if (c.expected[k].empty())
        file.fail(expected, strprintf("reference.expected has no file for the output `%s`",
                                      spec->tensors[size_t(c.outputs[k])].name.c_str()));
  }
}

// Fills `spec` from the harness's declarations and spec.yaml.
inline void load_spec_file(const std::string& path, const HarnessSpec& harness, SpecInfo* spec) {
  std::vector<unsigned char> bytes;
  std::string error;
  if (!read_file_bytes(path, &bytes, &error, size_t(16) << 20))
    spec_file_error(error + "\n(the harness reads its inits, checks and reference from the artifact's spec.yaml; "
                        "--spec FILE names another)");
  const SpecFile file(path, std::string(bytes.begin(), bytes.end()));
  spec->harness = &harness;
  spec->name = harness.name;
  spec->base_dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  spec->built_cc_major = harness.built_cc_major;
  spec->built_cc_minor = harness.built_cc_minor;
  spec->arch_specific = harness.arch_specific;

  // Sizes, in the harness's order.
  const YamlNode* sizes = file.section("sizes");
  for (int i = 0; i < harness.size_count; ++i) {
    const char* name = harness.size_names[i];
    const YamlNode* v = sizes ? sizes->get(name) : nullptr;
    if (v == nullptr) spec_file_error(strprintf("%s: sizes has no `%s`, which the harness was built with", path.c_str(), name));
    const int64_t value = file.integer(*v, name);
    if (value < 0) file.fail(*v, strprintf("sizes.%s must not be negative", name));
    if (harness.fixed_sizes != nullptr && value != harness.fixed_sizes[i])
      file.fail(*v, strprintf("sizes.%s is %lld, but this harness was compiled with %lld (%s): rebuild it "
                              "(repro build, or ./build.sh)",
                              name, (long long)value, (long long)harness.fixed_sizes[i], harness.sizes_fixed_reason));
    spec->sizes.push_back(value);
  }

  // Tensors: the harness declares them; spec.yaml gives each input its init.
  const YamlNode* tensors = file.section("tensors");
  spec->tensors.resize(size_t(harness.tensor_count));
  spec->inits.resize(size_t(harness.tensor_count));
  for (int i = 0; i < harness.tensor_count; ++i) {
    const TensorDecl& decl = harness.tensors[i];
    spec->tensors[size_t(i)].name = decl.name;
    spec->tensors[size_t(i)].dtype = decl.dtype;
    spec->tensors[size_t(i)].output = decl.output;
    spec->tensors[size_t(i)].intermediate = decl.intermediate;
    const YamlNode* t = tensors ? tensors->get(decl.name) : nullptr;
    if (t == nullptr)
      spec_file_error(strprintf("%s: tensors has no `%s`, which the harness was built with", path.c_str(), decl.name));
    if (!decl.output) spec->inits[size_t(i)] = read_init(file, *t, decl.name);
    // An intermediate's reference file (operator_calls.cuh reads it when it diagnoses).
    if (const YamlNode* reference = decl.intermediate != Lifetime::none ? t->get("reference") : nullptr)
      if (const YamlNode* v = reference->kind == YamlNode::Kind::map ? reference->get("file") : nullptr)
        spec->tensors[size_t(i)].reference_file =
            resolve_path(spec->base_dir, file.text(*v, strprintf("tensors.%s.reference.file", decl.name).c_str()));
  }

  // kind: replay's module and parameter bytes (replay.cuh), relative to spec.yaml: the kernel's,
  // or each replayed launch's of a sequence.
  const auto read_replay_files = [&](const YamlNode& launch, const std::string& path) {
    ReplayFiles& files = replay_files(path);
    if (const YamlNode* v = launch.get("cubin")) {
      files.cubin_as_written = file.text(*v, (path + ".cubin").c_str());
      files.cubin = join_path(spec->base_dir, files.cubin_as_written);
    }
    if (const YamlNode* v = launch.get("params")) files.params = join_path(spec->base_dir, file.text(*v, (path + ".params").c_str()));
  };
  if (const YamlNode* kernel = file.section("kernel")) read_replay_files(*kernel, "kernel");
  if (const YamlNode* launches = file.section("launches")) {
    if (launches->kind != YamlNode::Kind::seq) file.fail(*launches, "launches is a list of launches");
    for (size_t i = 0; i < launches->items.size(); ++i)
      read_replay_files(launches->items[i], strprintf("launches[%zu]", i));
  }
  // A captured launch's outputs before and after it (production.cuh).
  if (const YamlNode* capture = file.section("capture")) {
    for (int before = 1; before >= 0; --before) {
      const char* field = before ? "before" : "after";
      const YamlNode* files = capture->get(field);
      if (files == nullptr) continue;
      if (files->kind != YamlNode::Kind::map) file.fail(*files, strprintf("capture.%s maps outputs to .npy files", field));
      for (const auto& entry : files->entries) {
        Tensor* t = nullptr;
        for (Tensor& candidate : spec->tensors)
          if (candidate.name == entry.first) t = &candidate;
        if (t == nullptr || !t->output)
          file.fail(entry.second, strprintf("capture.%s.%s: not an output of this harness", field, entry.first.c_str()));
        (before ? t->capture_before : t->capture_after) = file.text(entry.second, "capture");
      }
    }
  }

  // The reference: a GEMM, optionally block-scaled, or a grouped GEMM (docs/spec.md, `reference`).
  const YamlNode* reference = file.section("reference");
  if (reference == nullptr) spec_file_error(path + ": no `reference`");
  const std::string op = file.text(file.require(*reference, "op", "reference"), "reference.op");
  if (op == "custom" || op == "file" || op == "attention" || op == "attention_backward") {
    read_custom_reference(file, *reference, op, spec);
  } else if (op == "gemm" || op == "grouped_gemm") {
    read_gemm_reference(file, *reference, op, spec);
  } else {
    file.fail(*reference, strprintf("reference.op `%s`: this runtime knows gemm, grouped_gemm, attention, attention_backward, custom and file", op.c_str()));
  }
  if (const YamlNode* provider = reference->get("provider")) {
    spec->reference_provider = file.text(*provider, "reference.provider");
    if (spec->reference_provider != "host" && spec->reference_provider != "device" &&
        spec->reference_provider != "emulated" && spec->reference_provider != "auto")
      file.fail(*provider, "reference.provider takes host, device, emulated or auto");
  }

  // Checks.
  if (const YamlNode* check = file.section("check")) {
    if (const YamlNode* v = check->get("rel_l2")) spec->rel_l2 = file.number(*v, "check.rel_l2");
    if (const YamlNode* v = check->get("rtol")) spec->rtol = file.number(*v, "check.rtol");
    if (const YamlNode* v = check->get("atol")) spec->atol = file.number(*v, "check.atol");
    if (const YamlNode* v = check->get("repeat")) {
      spec->repeat = int(file.integer(*v, "check.repeat"));
      if (spec->repeat < 1) file.fail(*v, "check.repeat must be at least 1");
    }
    if (const YamlNode* v = check->get("timeout")) {
      spec->timeout_seconds = file.number(*v, "check.timeout");
      if (!(spec->timeout_seconds > 0)) file.fail(*v, "check.timeout must be a positive number of seconds");
    }
    if (const YamlNode* v = check->get("stress")) {
      spec->stress = file.text(*v, "check.stress");
      StressMode mode;
      if (!parse_stress_mode(spec->stress, &mode)) file.fail(*v, "check.stress takes none, bandwidth, l2 or jitter");
    }
    if (const YamlNode* v = check->get("stress_sms")) {
      spec->stress_sms = int(file.integer(*v, "check.stress_sms"));
      if (spec->stress_sms < 1) file.fail(*v, "check.stress_sms must be 1 or more");
    }
  }
}

}  // namespace repro
