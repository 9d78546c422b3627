// UTF-8 and Unicode helpers of the HF tokenizers (see unicode_text.h).
#include "unicode_text.h"

#include <cstdint>

#include <unicode/uchar.h>
#include <unicode/utf8.h>

namespace hp::tokenizer_detail {

std::vector<UChar32> code_points(const std::string& s) {
  std::vector<UChar32> out;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto n = static_cast<int32_t>(s.size());
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U8_NEXT(p, i, n, c);
    out.push_back(c < 0 ? 0xFFFD : c);
  }
  return out;
}

std::string utf8(UChar32 c) {
  char buf[4];
  int32_t n = 0;
  U8_APPEND_UNSAFE(buf, n, c);
  return std::string(buf, static_cast<size_t>(n));
}

std::string utf8(const std::vector<UChar32>& cs) {
  std::string out;
  for (auto c : cs) out += utf8(c);
  return out;
}

bool category_starts(UChar32 c, char letter) {
  const auto t = static_cast<UCharCategory>(u_charType(c));
  switch (letter) {
    case 'C':
      return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_SURROGATE || t == U_PRIVATE_USE_CHAR ||
             t == U_UNASSIGNED;
    case 'P':
      return t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION || t == U_END_PUNCTUATION ||
             t == U_CONNECTOR_PUNCTUATION || t == U_OTHER_PUNCTUATION || t == U_INITIAL_PUNCTUATION ||
             t == U_FINAL_PUNCTUATION;
    case 'L':
      return t == U_UPPERCASE_LETTER || t == U_LOWERCASE_LETTER || t == U_TITLECASE_LETTER ||
             t == U_MODIFIER_LETTER || t == U_OTHER_LETTER;
    case 'N':
      return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
  }
  return false;
}

}  // namespace hp::tokenizer_detail
