// The spellings of the option enums (--model gcn, --device cuda, ...): one constexpr table of
// {value, spelling} per enum, read both ways. The parser and the name an enum is logged,
// summarised and checkpointed under come from the same table, so they cannot drift apart, and an
// error's "expected a, b or c" is the table itself. Header-only and in graph/, the lowest layer,
// so that every library's enums use it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "halo/graph/error.h"

namespace halo {

// One spelling of an enum value. Order matters: errors list the spellings in table order, and
// enum_name gives a value's first spelling (a second entry for the same value is an alias).
template <class E>
struct EnumName {
  E value;
  const char* name;
};

// The table's spellings as an error lists them: "a", "a or b", "a, b or c".
template <class E, std::size_t N>
std::string enum_choices(const EnumName<E> (&table)[N]) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += table[i].name;
  }
  return out;
}

// The entry spelled exactly s (case matters), or nullptr: for a parser whose error is worded
// otherwise than parse_enum's.
template <class E, std::size_t N>
constexpr const EnumName<E>* find_enum(const EnumName<E> (&table)[N], std::string_view s) {
  for (const EnumName<E>& e : table)
    if (s == e.name) return &e;
  return nullptr;
}

// The value spelled exactly s; otherwise throws ParamError
// "unknown FLAG 's' (expected a, b or c)" (FLAG as the user wrote it: "--model", "format").
template <class E, std::size_t N>
E parse_enum(const EnumName<E> (&table)[N], std::string_view flag, std::string_view s) {
  if (const EnumName<E>* e = find_enum(table, s)) return e->value;
  throw ParamError("unknown " + std::string(flag) + " '" + std::string(s) + "' (expected " +
                   enum_choices(table) + ")");
}

// The first spelling of v. A value outside the table (only a cast can make one) gets the first
// entry's, as the switches' default branches this replaced did.
template <class E, std::size_t N>
constexpr const char* enum_name(const EnumName<E> (&table)[N], E v) {
  for (const EnumName<E>& e : table)
    if (e.value == v) return e.name;
  return table[0].name;
}

}  // namespace halo
