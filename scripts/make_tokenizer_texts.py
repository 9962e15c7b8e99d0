#!/usr/bin/env python3
"""Writes tests/text/data/texts.json: the texts kiln's tokenizers are checked on against
the npm reference (scripts/tokenizer_reference.mjs). Deterministic: fragments from every
script, emoji sequences, whitespace runs, digits, code and special tokens, alone and in
seeded combinations.

Left out on purpose: U+0085 and U+FEFF, on which JavaScript's \\s (the reference's regex
engine) and Unicode's White_Space (Oniguruma's, Hugging Face's, and PCRE2's \\s) disagree:
"a \\u0085b" splits differently in the reference.
"""
import json
import random
from pathlib import Path

FRAGMENTS = [
    # Latin with accents
    "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    "Ünïcödé façade naïve café résumé", "Ça va? Très bien, merci.", "Größe, Straße, Fußgänger",
    "El niño comió jalapeños en Año Nuevo.", "Zażółć gęślą jaźń", "Příliš žluťoučký kůň",
    "Đây là tiếng Việt có dấu.", "Ærøskøbing og Åbenrå", "İstanbul'da ılık bir gün",
    "don't won't I'm you're we've they'll she'd it's", "DON'T WON'T I'M YOU'RE WE'VE THEY'LL SHE'D IT'S",
    # Cyrillic, Greek
    "Привет, мир! Как дела?", "Съешь же ещё этих мягких французских булок.", "Ελληνικά: Καλημέρα κόσμε!",
    "ΟΔΥΣΣΕΥΣ και ὀδυσσεύς", "Українська мова: ґанок, їжак, єнот",
    # Arabic, Hebrew (right to left)
    "مرحبا بالعالم", "اللغة العربية جميلة جداً ١٢٣٤٥", "שלום עולם", "עברית: אבגדהוזחטיכלמנסעפצקרשת",
    # Indic, Thai
    "नमस्ते दुनिया", "हिन्दी में लिखा गया वाक्य।", "বাংলা ভাষা", "தமிழ் மொழி", "สวัสดีชาวโลก", "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    # CJK, Hangul, kana
    "你好，世界！", "我爱自然语言处理。", "日本語のテキストです。", "カタカナとひらがな", "안녕하세요 세계", "한국어 문장입니다.",
    "中文English混合text", "東京タワー 333m",
    # emoji: single, ZWJ sequences, flags, skin tones, keycaps, variation selectors
    "🤗", "😀😃😄😁", "👨‍👩‍👧‍👦 family", "👩🏽‍💻 coder", "🏳️‍🌈 flag", "🇺🇸🇫🇷🇯🇵🇩🇪", "👍🏻👍🏼👍🏽👍🏾👍🏿",
    "1️⃣ 2️⃣ #️⃣", "❤️ ♥ ☺️", "🧑‍🤝‍🧑", "🐈‍⬛ black cat", "emoji🤖in🤖words",
    # combining marks
    "e\u0301 a\u0300 o\u0308 n\u0303", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334",
    "a\u0308\u0301\u0323", "\u0915\u094d\u0937", "\u1100\u1161\u11a8",
    # whitespace runs
    " ", "  ", "   leading spaces", "trailing spaces   ", "\t", "\ttab\tseparated\tvalues", "line one\nline two",
    "windows\r\nline\r\nendings", "\n\n\n", "mixed \t \n \r\n whitespace", "a  b   c    d", "\u00a0non\u00a0breaking\u00a0spaces",
    "ideographic\u3000space", "thin\u2009space", "     \n     ",
    # digits
    "0", "12", "123", "1234", "12345678901234567890", "3.14159265358979", "1,000,000", "+1 (555) 123-4567",
    "2024-01-15T13:45:00Z", "v1.2.3-rc4", "٠١٢٣٤٥٦٧٨٩", "१२३४", "x²+y³=z⁴", "½ ¼ ¾",
    # code
    "def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "#include <stdio.h>\nint main() { printf(\"hi\\n\"); }", "const x = () => ({a: 1, b: [2, 3]});",
    "SELECT * FROM users WHERE id = 42;", "<div class=\"x\">&amp; &lt;</div>", "$ ls -la | grep '^d' > out.txt",
    "if x != y && z >= 0 || !w:", "snake_case camelCase PascalCase kebab-case SCREAMING_CASE", "https://example.com/path?q=1&r=two#frag",
    "user@example.com", "{\"key\": [1, 2, {\"nested\": null}]}",
    # punctuation
    "...", "?!?!", "—em dash– en dash", "«quotes» „quotes“ “quotes”", "¿Qué? ¡Sí!", "(parentheses) [brackets] {braces}",
    "'single' \"double\" `back`", "a/b\\c|d", "~!@#$%^&*()_+",
    # special tokens inside text
    "<|begin_of_text|>", "<|begin_of_text|>Hello", "Hello<|end_of_text|>", "a<|eot_id|>b", "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|begin_of_text|><|begin_of_text|>", "<|begin_of", "<|reserved_special_token_5|>", "<s>", "<s>Hello", "Hello</s>",
    "<s> spaced </s>", "<unk>", "< s>", "<s", "s>", "<<s>>", "</s></s>", "<s>[INST] question [/INST]",
    # assorted
    "A", "a", "I", "x y", "Mr. O'Neil's book", "e.g. i.e. etc.", "The year 1999 and 2000",
    "CAPITALS AND lowercase", "tokenization tokenizer tokenize tokens", "supercalifragilisticexpialidocious",
    "pneumonoultramicroscopicsilicovolcanoconiosis", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "ababababababababab",
    "▁already▁has▁metaspace", "Ġ looks like byte level", "<0x41> literal byte token text",
]

SEPARATORS = [" ", "", "\n", "  ", "\t", ", ", "\r\n", " <s> ", "<|eot_id|>", "\n\n"]


def main() -> None:
    rng = random.Random(33)
    texts = [""] + FRAGMENTS
    while len(texts) < 420:
        k = rng.randint(2, 4)
        parts = rng.sample(FRAGMENTS, k)
        text = parts[0]
        for p in parts[1:]:
            text += rng.choice(SEPARATORS) + p
        texts.append(text)
    # a paragraph of English prose, several times over (the long-text case)
    prose = ("It was a bright cold day in April, and the clocks were striking thirteen. "
             "Winston Smith, his chin nuzzled into his breast in an effort to escape the vile wind, "
             "slipped quickly through the glass doors of Victory Mansions, though not quickly enough "
             "to prevent a swirl of gritty dust from entering along with him.\n")
    texts.append(prose * 8)
    out = Path(__file__).resolve().parent.parent / "tests" / "text" / "data" / "texts.json"
    out.write_text(json.dumps(texts, ensure_ascii=True, indent=0) + "\n")
    print(f"{out}: {len(texts)} texts")


if __name__ == "__main__":
    main()
