#!/usr/bin/env python3
"""Writes tests/tokenizer/corpus.txt: a seeded, varied tokenizer corpus.

Standard library only. One entry per line; inside an entry a backslash is
written as \\\\, a newline as \\n and a carriage return as \\r (nothing else is
escaped), so entries can hold newlines. make_reference.py and
tests/test_tokenizer.c undo exactly these escapes.

    python3 tests/tokenizer/make_corpus.py [-o tests/tokenizer/corpus.txt] [--seed 20261202] [-n 12000]
"""
import argparse
import random

LATIN = ("the quick brown fox jumps over lazy dog while rivers flow gently toward distant mountains "
         "and people gather in small cafés to discuss naïve theories about façades, résumés, "
         "jalapeño recipes, Zürich trains, São Paulo traffic, Kraków streets, Ærøskøbing ferries "
         "über straße größe año niño coração crème brûlée smörgåsbord déjà vu fiancée").split()
CYRILLIC = "привет мир как дела сегодня хорошая погода мы идём в парк читать книги Москва Київ объём съезд ёжик".split()
GREEK = "γειά σου κόσμε η γλώσσα είναι όμορφη Αθήνα θάλασσα ήλιος φιλοσοφία ψυχή".split()
ARABIC = "مرحبا بالعالم كيف حالك اليوم الطقس جميل نحن نذهب إلى المدرسة القاهرة كتاب".split()
HEBREW = "שלום עולם מה שלומך היום מזג האוויר יפה אנחנו הולכים לבית הספר ירושלים".split()
DEVANAGARI = "नमस्ते दुनिया आप कैसे हैं आज मौसम अच्छा है हम स्कूल जा रहे हैं हिन्दी क्षत्रिय".split()
CJK_ZH = ["你好世界", "今天天气很好", "我们去学校", "机器学习", "人工智能", "北京", "上海", "中文分词测试", "龍", "繁體字"]
CJK_JA = ["こんにちは世界", "今日は良い天気です", "東京", "カタカナ", "ひらがな", "日本語のテキスト", "ｶﾀｶﾅ"]
THAI = ["สวัสดีชาวโลก", "วันนี้อากาศดี", "ภาษาไทย", "กรุงเทพมหานคร", "ขอบคุณครับ"]
KOREAN = ["안녕하세요 세계", "오늘 날씨가 좋네요", "서울", "한국어 텍스트", "감사합니다"]
EMOJI = ["😀", "🎉", "🚀", "❤️", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "🇺🇸", "🧑🏿‍💻", "✅", "⚠️", "🤖", "🙈🙉🙊", "👩🏻‍🔬"]
CONTRACTIONS = ["I'm", "you're", "he's", "she'll", "we've", "they'd", "it's", "don't", "can't", "won't",
                "I'LL", "YOU'RE", "WE'VE", "O'Brien", "rock'n'roll", "y'all", "'tis"]
SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>", "<think>", "</think>"]
WORDS = [LATIN, CYRILLIC, GREEK, ARABIC, HEBREW, DEVANAGARI]

CODE = [
    'def {f}(x, y=None):\n    """Return the {w}."""\n    if y is None:\n        return x * 2\n    return x + y\n',
    'for (int i = 0; i < {n}; i++) {{\n\tsum += a[i] * b[i];\n}}\nprintf("%d\\n", sum);',
    'const {f} = async (url) => {{\n  const r = await fetch(url);\n  return r.json();\n}};',
    'fn {f}(v: &[u32]) -> u32 {{\n    v.iter().map(|x| x * {n}).sum()\n}}',
    'SELECT id, name FROM users WHERE age > {n} AND city = \'{w}\' ORDER BY name;',
    '#include <stdio.h>\nint main(void) {{ return {n}; }}',
    'package main\n\nimport "fmt"\n\nfunc main() {{\n\tfmt.Println("{w}")\n}}',
    '<div class="{w}"><a href="https://example.com/{f}?q={n}&lang=en">link</a></div>',
    '{{"key": "{w}", "value": {n}, "list": [1, 2, 3], "nested": {{"ok": true}}}}',
    'x = [{n}, {n}.5, -{n}e-3, 0x{h}, 0b1010]  # {w}',
    '    if (err != nil) {{\n        return fmt.Errorf("{f}: %w", err)\n    }}',
    'public static void {f}(String[] args) {{ System.out.println("{w}"); }}',
    '$ ls -la /usr/local/bin | grep {w} && echo "done" > /tmp/{f}.log',
    'regex = r"^\\s*(\\d+)\\s+(\\w+)$"  # matches {n} {w}',
]


def word(rng):
    return rng.choice(rng.choice(WORDS))


def prose(rng, pool, n):
    out = " ".join(rng.choice(pool) for _ in range(n))
    return out[0].upper() + out[1:] + rng.choice([".", "!", "?", ",", ";", ":", "…", ""])


def number_line(rng):
    kinds = [
        lambda: str(rng.randint(0, 10 ** rng.randint(1, 12))),
        lambda: f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 6)}f}",
        lambda: f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        lambda: f"{rng.randint(1, 28)}/{rng.randint(1, 12)}/{rng.randint(0, 99):02d}",
        lambda: f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
        lambda: f"${rng.randint(1, 99999):,}.{rng.randint(0, 99):02d}",
        lambda: f"{rng.randint(1, 100)}%",
        lambda: f"+1 ({rng.randint(200, 999)}) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
        lambda: f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}",
        lambda: f"{rng.randint(1, 999)}e{rng.randint(-9, 9)}",
        lambda: "٣٤٥ ١٢ ०१२३ ๑๒๓ ⅫⅣ ½ ¾ ²³",
    ]
    return " ".join(rng.choice(kinds)() for _ in range(rng.randint(1, 6)))


def url_line(rng):
    host = rng.choice(["example.com", "wisp.dev", "en.wikipedia.org", "localhost:8080", "192.168.0.1", "über.de"])
    path = "/".join(rng.choice(LATIN) for _ in range(rng.randint(0, 4)))
    q = f"?id={rng.randint(0, 9999)}&q={rng.choice(LATIN)}" if rng.random() < 0.5 else ""
    return f"{rng.choice(['see', 'Visit', 'url:', '->', ''])} {rng.choice(['https', 'http', 'ftp'])}://{host}/{path}{q} {rng.choice(['#frag', '', 'mail@' + host])}"


def whitespace_line(rng):
    parts = []
    for _ in range(rng.randint(2, 8)):
        parts.append(rng.choice([word(rng), rng.choice(EMOJI), str(rng.randint(0, 999))]))
        parts.append(rng.choice([" ", "  ", "   ", "\t", "\t\t", " \t ", "\n", "\n\n", "\r\n", " \n ", "\n   ",
                                 "        ", "\u00a0", "\u3000", "\u2003"]))
    s = "".join(parts)
    if rng.random() < 0.3:
        s = rng.choice([" ", "  ", "\n", "\t"]) + s
    if rng.random() < 0.3:
        s = s + rng.choice([" ", "   ", "\n", "\n\n", "\t"])
    return s


def special_line(rng):
    out = []
    for _ in range(rng.randint(1, 4)):
        out.append(rng.choice([prose(rng, rng.choice(WORDS), rng.randint(1, 5)), rng.choice(SPECIALS),
                               rng.choice(SPECIALS) + "\n", "user\n" + word(rng), " "]))
    return rng.choice(["", " ", "\n"]).join(out)


def mixed_line(rng):
    pool = [word(rng) for _ in range(3)] + [rng.choice(EMOJI), rng.choice(CJK_ZH), rng.choice(THAI),
                                           rng.choice(KOREAN), rng.choice(CJK_JA), rng.choice(CONTRACTIONS)]
    rng.shuffle(pool)
    return " ".join(pool[: rng.randint(2, len(pool))])


def code_line(rng):
    t = rng.choice(CODE)
    return t.format(f=rng.choice(["compute", "parse_args", "load", "runModel", "do_it", "f"]),
                    w=rng.choice(LATIN + CYRILLIC[:4]), n=rng.randint(0, 1000), h=f"{rng.randint(0, 65535):X}")


def nfd_line(rng):
    # Decomposed accents: NFC normalizers change these, byte-level BPE must not.
    base = rng.choice(["cafe\u0301", "nai\u0308ve", "A\u030angstro\u0308m", "n\u0303", "o\u0302\u0323", "\u1100\u1161\u11a8"])
    return f"{prose(rng, LATIN, rng.randint(1, 4))} {base} {word(rng)}"


def odd_line(rng):
    return rng.choice([
        "", " ", "\n", "  \n\n  ", "a", "'", "''", "'s", "'S", "'ll've", "...", "!!!???", "----", "====",
        "\u200b\u200d\u2060", "\ufeffBOM", "ǅ ǈ ǋ", "ß ẞ ﬁ ﬂ", "İstanbul ı", "K Å Ω", "x\u0000y".replace("\u0000", ""),
        "\U0001f600" * rng.randint(1, 5), "a" * rng.randint(50, 300), " " * rng.randint(10, 80), "\t" * rng.randint(2, 9),
        "\n" * rng.randint(2, 9), "aaaa bbbb" * rng.randint(2, 9), "12345678901234567890", "ab12cd34ef",
        "ℌℍℎ ⅅⅆ ∑∏∫ ≤≥≠ → ⇒ ∀∃", "<|im_start|", "|im_end|>", "<<|im_start|>>", "<|im_start|><|im_end|>",
        "</think></think><think>", "<think >", "emoji🇫🇷🇩🇪flags", "👨‍👩‍👧‍👦👨‍👩‍👧‍👦",
    ])


GENERATORS = [
    (lambda r: prose(r, LATIN, r.randint(3, 25)), 14),
    (lambda r: prose(r, CYRILLIC, r.randint(3, 15)), 6),
    (lambda r: prose(r, GREEK, r.randint(3, 12)), 4),
    (lambda r: prose(r, ARABIC, r.randint(3, 12)), 4),
    (lambda r: prose(r, HEBREW, r.randint(3, 12)), 4),
    (lambda r: prose(r, DEVANAGARI, r.randint(3, 12)), 4),
    (lambda r: "".join(r.choice(CJK_ZH) for _ in range(r.randint(1, 6))) + r.choice(["。", "，", "！", ""]), 4),
    (lambda r: "".join(r.choice(CJK_JA) for _ in range(r.randint(1, 5))) + r.choice(["。", "、", ""]), 3),
    (lambda r: " ".join(r.choice(THAI) for _ in range(r.randint(1, 4))), 3),
    (lambda r: " ".join(r.choice(KOREAN) for _ in range(r.randint(1, 4))), 3),
    (lambda r: " ".join(r.choice(EMOJI) for _ in range(r.randint(1, 6))) + " " + prose(r, LATIN, 3), 4),
    (code_line, 10),
    (number_line, 7),
    (url_line, 4),
    (whitespace_line, 7),
    (lambda r: " ".join(r.choice(CONTRACTIONS + LATIN) for _ in range(r.randint(2, 12))), 5),
    (special_line, 5),
    (mixed_line, 6),
    (nfd_line, 2),
    (odd_line, 3),
]


def escape(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", default="tests/tokenizer/corpus.txt")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("-n", type=int, default=12000)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    gens = [g for g, _ in GENERATORS]
    weights = [w for _, w in GENERATORS]
    lines = []
    while len(lines) < a.n:
        s = rng.choices(gens, weights)[0](rng)
        if rng.random() < 0.05:  # occasionally glue two kinds together
            s = s + rng.choice(["\n", " ", ""]) + rng.choices(gens, weights)[0](rng)
        lines.append(escape(s))
    with open(a.o, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
