// The option-enum tables: parsing, naming, the error's wording and list, aliases, and that the
// lookups work at compile time.
#include "halo/graph/enum_names.h"

#include <gtest/gtest.h>

#include "../test_util.h"

namespace halo {
namespace {

enum class Fruit { kApple, kPear, kFig, kQuince };

// kQuince has no entry (a value named elsewhere, like PartitionMethod::kAssignment); "pyrus" is
// an alias of kPear, after its main spelling.
constexpr EnumName<Fruit> kFruits[] = {{Fruit::kApple, "apple"},
                                       {Fruit::kPear, "pear"},
                                       {Fruit::kFig, "fig"},
                                       {Fruit::kPear, "pyrus"}};
constexpr EnumName<Fruit> kOne[] = {{Fruit::kFig, "fig"}};
constexpr EnumName<Fruit> kTwo[] = {{Fruit::kFig, "fig"}, {Fruit::kPear, "pear"}};

static_assert(find_enum(kFruits, "fig")->value == Fruit::kFig);
static_assert(find_enum(kFruits, "plum") == nullptr);
static_assert(std::string_view(enum_name(kFruits, Fruit::kPear)) == "pear");

TEST(EnumNames, ParsesEverySpellingAndAliases) {
  EXPECT_EQ(parse_enum(kFruits, "--fruit", "apple"), Fruit::kApple);
  EXPECT_EQ(parse_enum(kFruits, "--fruit", "pear"), Fruit::kPear);
  EXPECT_EQ(parse_enum(kFruits, "--fruit", "fig"), Fruit::kFig);
  EXPECT_EQ(parse_enum(kFruits, "--fruit", "pyrus"), Fruit::kPear);
}

TEST(EnumNames, NamesAValueByItsFirstSpelling) {
  EXPECT_STREQ(enum_name(kFruits, Fruit::kApple), "apple");
  EXPECT_STREQ(enum_name(kFruits, Fruit::kFig), "fig");
  EXPECT_STREQ(enum_name(kFruits, Fruit::kPear), "pear");     // not the alias
  EXPECT_STREQ(enum_name(kFruits, Fruit::kQuince), "apple");  // outside: the first entry
  EXPECT_STREQ(enum_name(kTwo, Fruit::kApple), "fig");
}

TEST(EnumNames, RefusesOtherSpellingsWithTheListInTableOrder) {
  EXPECT_EQ(test::param_error([] { parse_enum(kFruits, "--fruit", "Apple"); }),
            "unknown --fruit 'Apple' (expected apple, pear, fig or pyrus)");
  EXPECT_EQ(test::param_error([] { parse_enum(kFruits, "--fruit", ""); }),
            "unknown --fruit '' (expected apple, pear, fig or pyrus)");
  EXPECT_EQ(test::param_error([] { parse_enum(kFruits, "--fruit", "apple "); }),
            "unknown --fruit 'apple ' (expected apple, pear, fig or pyrus)");
  EXPECT_EQ(test::param_error([] { parse_enum(kTwo, "fruit", "kiwi"); }),
            "unknown fruit 'kiwi' (expected fig or pear)");
  EXPECT_EQ(test::param_error([] { parse_enum(kOne, "--fruit", "kiwi"); }),
            "unknown --fruit 'kiwi' (expected fig)");
}

TEST(EnumNames, ChoicesJoinWithCommasAndOr) {
  EXPECT_EQ(enum_choices(kOne), "fig");
  EXPECT_EQ(enum_choices(kTwo), "fig or pear");
  EXPECT_EQ(enum_choices(kFruits), "apple, pear, fig or pyrus");
}

}  // namespace
}  // namespace halo
