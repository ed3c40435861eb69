// The .npy header at the start of each .npz member: its magic and version, the Python dict
// literal that holds descr, fortran_order and shape (a small parser of that literal), the dtype
// descr's parse, and the checks that the shape fits the member's size. See npz.h for the rules.
#include <cstring>
#include <limits>
#include <stdexcept>

#include "npz_internal.h"

namespace halo {
using namespace npz_internal;  // EntryReader, Descr, ParsedHeader (npz_internal.h)

namespace {

constexpr std::uint64_t kMaxNpyHeader = std::uint64_t{1} << 20;

// ---- .npy header: a Python dict literal ---------------------------------------------------

struct PyValue {
  enum Kind { kStr, kInt, kBool, kNone, kTuple, kList, kDict } kind = kNone;
  std::string str;
  bool negative = false;
  std::uint64_t magnitude = 0;
  bool boolean = false;
  std::vector<PyValue> items;     // tuple/list elements, dict values
  std::vector<std::string> keys;  // dict keys (parallel to items)
};

class PyParser {
 public:
  explicit PyParser(const std::string& s) : s_(s) {}

  PyValue parse() {
    PyValue v = value(0);
    skip_ws();
    if (i_ != s_.size()) throw std::runtime_error("unexpected text after the dict");
    return v;
  }

 private:
  void skip_ws() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\0'))
      ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool word(const char* w) {
    const std::size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }

  PyValue value(int depth) {
    if (depth > 16) throw std::runtime_error("nested too deeply");
    skip_ws();
    if (i_ >= s_.size()) throw std::runtime_error("unexpected end");
    PyValue v;
    const char c = s_[i_];
    if (c == '\'' || c == '"') {
      v.kind = PyValue::kStr;
      v.str = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = PyValue::kInt;
      if (c == '-') {
        v.negative = true;
        ++i_;
      }
      if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') throw std::runtime_error("bad number");
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        const auto d = static_cast<std::uint64_t>(s_[i_] - '0');
        if (v.magnitude > (std::numeric_limits<std::uint64_t>::max() - d) / 10)
          throw std::runtime_error("integer too large");
        v.magnitude = v.magnitude * 10 + d;
        ++i_;
      }
      if (i_ < s_.size() && (s_[i_] == 'L' || s_[i_] == 'l')) ++i_;  // Python 2 long
    } else if (word("True")) {
      v.kind = PyValue::kBool;
      v.boolean = true;
    } else if (word("False")) {
      v.kind = PyValue::kBool;
    } else if (word("None")) {
      v.kind = PyValue::kNone;
    } else if (c == '(' || c == '[') {
      v.kind = c == '(' ? PyValue::kTuple : PyValue::kList;
      const char close = c == '(' ? ')' : ']';
      ++i_;
      while (!eat(close)) {
        v.items.push_back(value(depth + 1));
        if (!eat(',')) {
          if (!eat(close)) throw std::runtime_error("expected ',' or closing bracket");
          break;
        }
      }
    } else if (c == '{') {
      v.kind = PyValue::kDict;
      ++i_;
      while (!eat('}')) {
        skip_ws();
        if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
          throw std::runtime_error("expected a string key");
        v.keys.push_back(string());
        if (!eat(':')) throw std::runtime_error("expected ':'");
        v.items.push_back(value(depth + 1));
        if (!eat(',')) {
          if (!eat('}')) throw std::runtime_error("expected ',' or '}'");
          break;
        }
      }
    } else {
      throw std::runtime_error(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  std::string string() {
    const char q = s_[i_++];
    std::string out;
    while (true) {
      if (i_ >= s_.size()) throw std::runtime_error("unterminated string");
      char c = s_[i_++];
      if (c == q) break;
      if (c == '\\') {
        if (i_ >= s_.size()) throw std::runtime_error("unterminated string");
        c = s_[i_++];
      }
      out += c;
    }
    return out;
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

}  // namespace

namespace npz_internal {

std::string shape_str(const std::vector<std::uint64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

Descr parse_descr(const std::string& d) {
  Descr r;
  std::size_t i = 0;
  if (i < d.size() && std::strchr("<>|=", d[i]) && d[i] != '\0') r.order = d[i++];
  if (i >= d.size()) return r;
  r.kind = d[i++];
  std::uint64_t n = 0;
  bool digits = false;
  while (i < d.size() && d[i] >= '0' && d[i] <= '9') {
    n = n * 10 + static_cast<std::uint64_t>(d[i++] - '0');
    digits = true;
    if (n > (std::uint64_t{1} << 32)) return r;
  }
  const std::string rest = d.substr(i);
  switch (r.kind) {
    case 'b':
    case 'i':
    case 'u':
    case 'f':
    case 'c':
      if (!digits || n == 0 || !rest.empty()) return r;
      r.item_size = static_cast<std::size_t>(n);
      break;
    case 'U':
      if (!digits || !rest.empty()) return r;
      r.item_size = static_cast<std::size_t>(4 * n);
      break;
    case 'S':
    case 'a':
    case 'V':
      if (!digits || !rest.empty()) return r;
      r.item_size = static_cast<std::size_t>(n);
      break;
    case 'O':
      if (!rest.empty()) return r;
      r.item_size = digits ? static_cast<std::size_t>(n) : sizeof(void*);
      break;
    case 'M':
    case 'm':
      if (!digits || n == 0 || (!rest.empty() && (rest.front() != '[' || rest.back() != ']')))
        return r;
      r.item_size = static_cast<std::size_t>(n);
      break;
    default:
      return r;
  }
  r.ok = true;
  return r;
}

namespace {

// Reads the magic, version and header length and returns the header text (trailing padding
// dropped), setting *prefix_out to the bytes before it and *hlen_out to its length; separate
// because it is the only part that reads raw bytes.
std::string read_header_text(EntryReader& rd, std::uint64_t* prefix_out, std::uint64_t* hlen_out) {
  const Archive& a = rd.archive();
  const Entry& e = rd.entry();
  unsigned char pre[12];
  if (rd.read(reinterpret_cast<std::byte*>(pre), 10) != 10)
    a.fail(e, "too short for a .npy header");
  if (std::memcmp(pre, "\x93NUMPY", 6) != 0) a.fail(e, "not a .npy file (bad magic)");
  const int major = pre[6], minor = pre[7];
  std::uint64_t hlen = 0, prefix = 10;
  if (major == 1 && minor == 0) {
    hlen = rd16(pre + 8);
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (rd.read(reinterpret_cast<std::byte*>(pre + 10), 2) != 2)
      a.fail(e, "too short for a .npy header");
    hlen = rd32(pre + 8);
    prefix = 12;
  } else {
    a.fail(e, "unsupported .npy format version " + std::to_string(major) + "." +
                  std::to_string(minor));
  }
  if (hlen > kMaxNpyHeader)
    a.fail(e, ".npy header of " + std::to_string(hlen) + " bytes is too long");
  std::string text(static_cast<std::size_t>(hlen), '\0');
  if (rd.read(reinterpret_cast<std::byte*>(text.data()), text.size()) != text.size())
    a.fail(e, "truncated .npy header");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  *prefix_out = prefix;
  *hlen_out = hlen;
  return text;
}

// Fills info's descr, fortran_order and shape from the header's dict literal; separate because
// it checks the dict's keys and types, not the bytes around it.
void parse_header_dict(const Archive& a, const Entry& e, const std::string& text,
                       NpyArrayInfo& info) {
  PyValue dict;
  try {
    dict = PyParser(text).parse();
    if (dict.kind != PyValue::kDict) throw std::runtime_error("not a dict");
  } catch (const std::runtime_error& ex) {
    a.fail(e, std::string("bad .npy header (") + ex.what() + "): " + text.substr(0, 200));
  }
  bool have_descr = false, have_order = false, have_shape = false;
  for (std::size_t k = 0; k < dict.keys.size(); ++k) {
    const PyValue& v = dict.items[k];
    if (dict.keys[k] == "descr") {
      if (v.kind == PyValue::kList)
        a.fail(e, "structured dtypes are not supported (descr " + text.substr(0, 200) + ")");
      if (v.kind != PyValue::kStr) a.fail(e, "bad .npy header: descr is not a string");
      info.descr = v.str;
      have_descr = true;
    } else if (dict.keys[k] == "fortran_order") {
      if (v.kind != PyValue::kBool) a.fail(e, "bad .npy header: fortran_order is not a bool");
      info.fortran_order = v.boolean;
      have_order = true;
    } else if (dict.keys[k] == "shape") {
      if (v.kind != PyValue::kTuple && v.kind != PyValue::kList)
        a.fail(e, "bad .npy header: shape is not a tuple");
      for (const PyValue& d : v.items) {
        if (d.kind != PyValue::kInt || d.negative)
          a.fail(e, "bad .npy header: shape holds a non-integer or negative dimension");
        info.shape.push_back(d.magnitude);
      }
      have_shape = true;
    }
  }
  if (!have_descr || !have_order || !have_shape)
    a.fail(e, "bad .npy header: needs descr, fortran_order and shape: " + text.substr(0, 200));
}

}  // namespace

ParsedHeader read_header(EntryReader& rd) {
  const Archive& a = rd.archive();
  const Entry& e = rd.entry();
  std::uint64_t prefix = 0, hlen = 0;
  const std::string text = read_header_text(rd, &prefix, &hlen);
  ParsedHeader h;
  NpyArrayInfo& info = h.info;
  info.name = e.name.substr(0, e.name.size() - 4);
  parse_header_dict(a, e, text, info);
  const Descr d = parse_descr(info.descr);
  if (!d.ok) a.fail(e, "unknown dtype descr '" + info.descr + "'");
  info.item_size = d.item_size;

  std::uint64_t count = 1;
  for (std::uint64_t dim : info.shape) {
    if (dim != 0 && count > std::numeric_limits<std::uint64_t>::max() / dim)
      a.fail(e, "shape " + shape_str(info.shape) + " overflows");
    count *= dim;
  }
  if (info.item_size != 0 && count > std::numeric_limits<std::uint64_t>::max() / info.item_size)
    a.fail(e, "shape " + shape_str(info.shape) + " overflows");
  h.header_bytes = prefix + hlen;
  if (h.header_bytes > e.usize) a.fail(e, "truncated .npy header");
  h.payload_bytes = e.usize - h.header_bytes;
  if (d.kind != 'O' && h.payload_bytes != count * info.item_size)
    a.fail(e, "payload is " + std::to_string(h.payload_bytes) + " bytes but shape " +
                  shape_str(info.shape) + " of " + info.descr + " needs " +
                  std::to_string(count * info.item_size));
  return h;
}

}  // namespace npz_internal

}  // namespace halo
