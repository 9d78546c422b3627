// UTF-8 and Unicode helpers shared by the HF tokenizers (wordpiece.cc, byte_level_bpe.cc). Private
// to src/data/tokenizers.
#pragma once

#include <string>
#include <vector>

#include <unicode/umachine.h>

namespace hp::tokenizer_detail {

// UTF-8 -> code points; an invalid byte becomes U+FFFD.
std::vector<UChar32> code_points(const std::string& s);

// Code points -> UTF-8.
std::string utf8(UChar32 c);
std::string utf8(const std::vector<UChar32>& cs);

// Whether c's Unicode general category is one of C (other), P (punctuation), L (letter) or N (number).
bool category_starts(UChar32 c, char letter);

}  // namespace hp::tokenizer_detail
