"""Deterministic text corpus for the tokenizer oracle tests and benchmark.

corpus(n, seed) returns n strings mixing real English (Debian `fortunes`), sentences in many
scripts (CJK, Japanese, Hangul, Arabic, Hebrew, Devanagari, Bengali, Tamil, Thai, Cyrillic, Greek,
Georgian, Armenian, Ethiopic, Vietnamese, Turkish ...), emoji with ZWJ sequences, skin tones, flags
and keycaps, combining marks (stacked, decomposed NFD text, out-of-order marks, conjoining Hangul
jamo), odd whitespace (tabs, CRLF, runs of spaces, NBSP, U+3000, U+2028, U+0085, ZWSP, BOM),
digits in several scripts, compatibility characters, control characters, code, URLs, long words,
long runs without spaces, and special-token strings ("<|endoftext|>", "[CLS]", "<s>" ...).
The same (n, seed) always gives the same list. `python tok_corpus.py N OUT.jsonl` writes one JSON
string per line.
"""
import glob
import json
import os
import random
import sys
import unicodedata

FORTUNE_DIR = "/usr/share/games/fortunes"

SENTENCES = [
    "我们今天去公园散步，天气非常好。", "机器学习是人工智能的一个分支。", "北京是中华人民共和国的首都。",
    "今日はいい天気ですね。", "東京タワーに行きました！", "カタカナとひらがなと漢字を混ぜて書きます。",
    "안녕하세요, 만나서 반갑습니다.", "한국어 자연어 처리는 재미있어요.", "서울특별시 강남구",
    "مرحبا بالعالم، كيف حالك اليوم؟", "اللغة العربية جميلة جدا.", "شكراً جزيلاً ١٢٣",
    "שלום עולם, מה שלומך?", "נֶפֶשׁ עִם נִקּוּד",
    "नमस्ते दुनिया, आप कैसे हैं?", "भारत एक विशाल देश है।", "क़िला और ज़रूर",
    "আমি বাংলায় গান গাই।", "வணக்கம் உலகம், எப்படி இருக்கிறீர்கள்?", "ಕನ್ನಡ ಭಾಷೆ", "తెలుగు భాష",
    "สวัสดีครับ วันนี้อากาศดีมาก", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ", "ພາສາລາວ", "ភាសាខ្មែរ",
    "Привет, мир! Как дела?", "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ёжик в тумане. ЁЛКА", "Україна, Ґаздиня, їжак", "Γειά σου Κόσμε! Η γρήγορη καφέ αλεπού.",
    "ΣΟΦΟΣ σοφός ΟΔΥΣΣΕΥΣ", "გამარჯობა მსოფლიო", "Բարեւ աշխարհ", "ሰላም ልዑል", "မင်္ဂလာပါ",
    "Tiếng Việt có nhiều dấu thanh: ả ã ạ ặ ễ ộ ừ.", "İstanbul'da ılık bir gün. IĞDIR ŞİŞLİ",
    "Größe, Straße, ẞ, Äpfel, Über alles", "L'été dernier, j'ai mangé une crème brûlée à Noël.",
    "¿Dónde está la biblioteca? ¡Olé!", "Zażółć gęślą jaźń", "Ærøskøbing og Ålborg", "Þetta er íslenska",
    "Dziękuję bardzo", "Ceština: příliš žluťoučký kůň", "Αυτό είναι ελληνικό κείμενο με τόνους.",
    "ʻŌlelo Hawaiʻi", "Māori: whakapapa", "ǅemal ǈubljana ǋ", "ﬁne ﬂour ﬀ ﬃ", "ＡＢＣ１２３ｱｲｳ",
    "Hello World! hello world, hello  world", "l'ÉCOLE, DAY-to-DAY, a DAYtime; Thanks!  the end", "Thanks   for the fine day",
]

EMOJI = [
    "😀", "😃", "😄", "😁", "😂", "🤣", "🥰", "🫠", "🫨", "🧑‍💻", "👨‍👩‍👧‍👦", "👩🏽‍🚀", "👍🏽", "👍🏿",
    "🏳️‍🌈", "🏴‍☠️", "🇺🇸", "🇯🇵", "🇫🇷🇩🇪", "1️⃣", "#️⃣", "❤️", "❤", "✨", "🔥", "🎉", "🙏", "🤖",
    "🦄", "🍕", "☕", "⚽", "🚀", "💯", "🧑🏻‍🤝‍🧑🏿", "🫶🏼", "👁️‍🗨️", "🐈‍⬛",
]

WHITESPACE = ["\t", "\r\n", "\n", "\n\n", "   ", "      ", "\u00a0", "\u3000", "\u2009", "\u200b", "\u2028",
              "\u0085", "\x0b", "\x0c", "\ufeff", " \n ", " \t\t ", "\r", "\u2003\u2003", "\u205f", "\u1680"]

CONTROLS = ["\x01", "\x07", "\x1b[31mred\x1b[0m", "\x7f", "\u200e", "\u200f", "\u00ad", "\ufffd", "\u2066x\u2069",
            "\u034f", "\ue000", "\U000f0000"]

CODE = [
    "def f(x):\n    return x**2  # square", "int main(void) { printf(\"%d\\n\", a[i]); return 0; }",
    "{\"key\": [1, 2.5e-3, null, true], \"k2\": {\"a\": \"b\"}}", "<div class=\"a\">&amp; &lt;p&gt;</div>",
    "SELECT * FROM t WHERE id >= 10 AND name LIKE '%x%';", "x += y; // comment\n\ty -= 1;",
    "https://example.com/path/to/page?q=1&r=2#frag", "user.name+tag@example.org",
    "$HOME/.config/app/*.json", "for (i = 0; i < n; ++i) sum += a[i] * b[i];", "git commit -m \"fix: bug #123\"",
    "if x != None and y == 'abc':\n\tpass", "λx.x → (λy.y)", "a_b_c = __init__(self, *args, **kwargs)",
    "0x7fffffff 0b1010 1e-9 -3.5E+10", "std::vector<std::string> v{\"a\", \"b\"};", "#include <stdio.h>",
]

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]",
            "<s>", "</s>", "<unk>", "<pad>", "<mask>", "<|endoftext|><|endoftext|>", "[MASK][MASK]"]

COMPAT = ["①②③", "Ⓐⓑ", "ℌℍ", "㎏㎞", "½ ¼ ¾", "x² + y³", "Ⅻ ⅻ", "™ ℠ ©", "…", "‼", "ﷺ", "ǆ", "ﬅ", "ſ",
          "K Å", "Ω", "ÅÅ", "ḱ", "ǰ", "ΐ", "ᾗ", "ﾊﾟ", "㍻", "⑴⒜", "ℵ", "𝐀𝐁𝐂 𝒜", "𝟘𝟙𝟚"]

DIGITS = ["٠١٢٣٤٥٦٧٨٩", "۱۲۳", "०१२३४५६७८९", "১২৩", "๑๒๓", "１２３４５", "፩፪፫", "𝟏𝟐𝟑", "〇一二三"]

SCRIPT_RANGES = [(0x0041, 0x005A), (0x0061, 0x007A), (0x00C0, 0x024F), (0x0370, 0x03FF), (0x0400, 0x04FF),
                 (0x0530, 0x058F), (0x0590, 0x05FF), (0x0600, 0x06FF), (0x0900, 0x097F), (0x0980, 0x09FF),
                 (0x0E00, 0x0E7F), (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x3040, 0x30FF),
                 (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x2000, 0x206F), (0x2100, 0x22FF), (0x2500, 0x25FF),
                 (0x1F300, 0x1F64F), (0x20000, 0x2A6DF), (0xFF00, 0xFFEF), (0x0300, 0x036F), (0x1D400, 0x1D7FF)]


def _fortunes():
    lines = []
    for path in sorted(glob.glob(os.path.join(FORTUNE_DIR, "*"))):
        if path.endswith((".dat", ".u8")) or os.path.isdir(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        for chunk in text.split("\n%\n"):
            chunk = chunk.strip("\n")
            if chunk:
                lines.append(chunk)
    if not lines:
        raise RuntimeError(f"no fortunes found in {FORTUNE_DIR} (install the Debian 'fortunes' package)")
    return lines


def _assigned(cp):
    c = unicodedata.category(chr(cp))
    return c not in ("Cn", "Cs", "Co")


def _random_chars(rng, n):
    lo, hi = rng.choice(SCRIPT_RANGES)
    out = []
    while len(out) < n:
        cp = rng.randint(lo, hi)
        if _assigned(cp):
            out.append(chr(cp))
    return "".join(out)


def _stacked(rng):
    base = rng.choice("aeiouAEIOUnxyzαθжя")
    marks = "".join(chr(rng.randint(0x300, 0x36F)) for _ in range(rng.randint(1, 5)))
    return base + marks


def _long_word(rng):
    k = rng.randint(30, 400)
    kind = rng.randrange(7)
    if kind == 0:
        return rng.choice("abcxyz") * k
    if kind == 1:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(k))
    if kind == 2:
        return "".join(rng.choice("0123456789abcdef") for _ in range(64))
    if kind == 3:
        return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(k)) + "=="
    if kind == 4:
        return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(k))
    if kind == 5:
        return rng.choice("!?-=*#.~_") * rng.randint(5, 120)
    return "Pneumonoultramicroscopicsilicovolcanoconiosis" * rng.randint(1, 4)


def _number(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.randint(0, 10 ** rng.randint(1, 20)))
    if kind == 1:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 6)}f}"
    if kind == 2:
        return f"{rng.randint(1, 10**9):,}"
    if kind == 3:
        return rng.choice(DIGITS)
    if kind == 4:
        return f"{rng.randint(1, 12)}/{rng.randint(1, 28)}/{rng.randint(1900, 2100)} {rng.randint(0, 23)}:{rng.randint(0, 59):02d}"
    return "".join(rng.choice("0123456789") for _ in range(rng.randint(20, 60)))


def _case(rng, s):
    k = rng.randrange(10)
    if k == 0:
        return s.upper()
    if k == 1:
        return s.title()
    if k == 2:
        return s.lower()
    return s


def _fragment(rng, fortunes):
    k = rng.random()
    if k < 0.34:
        return _case(rng, rng.choice(fortunes))
    if k < 0.50:
        s = rng.choice(SENTENCES)
        r = rng.randrange(6)
        if r == 0:
            s = unicodedata.normalize("NFD", s)
        elif r == 1:
            s = unicodedata.normalize("NFKC", s)
        return s
    if k < 0.56:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 6)))
    if k < 0.61:
        return _random_chars(rng, rng.randint(1, 40))
    if k < 0.65:
        return "".join(_stacked(rng) for _ in range(rng.randint(1, 4)))
    if k < 0.70:
        return rng.choice(CODE)
    if k < 0.74:
        return _long_word(rng)
    if k < 0.80:
        return _number(rng)
    if k < 0.84:
        return rng.choice(COMPAT)
    if k < 0.88:
        return rng.choice(SPECIALS)
    if k < 0.91:
        return rng.choice(CONTROLS)
    if k < 0.94:
        return "a\u0323\u0301 a\u0301\u0323 e\u0308\u0304 \u1100\u1161\u11a8 \u1112\u1161\u11ab" if rng.random() < 0.5 \
            else unicodedata.normalize("NFD", rng.choice(SENTENCES))
    return rng.choice(WHITESPACE) * rng.randint(1, 3)


def corpus(n, seed=1234):
    rng = random.Random(seed)
    fortunes = _fortunes()
    seps = [" ", " ", " ", "", "\n", "\t", ", ", "  ", "\u3000", "\r\n", " - "]
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.01:
            out.append("")
            continue
        if r < 0.02:
            out.append(rng.choice(WHITESPACE) * rng.randint(1, 4))
            continue
        parts = [_fragment(rng, fortunes) for _ in range(rng.choice((1, 1, 2, 2, 3, 4)))]
        s = parts[0]
        for p in parts[1:]:
            s += rng.choice(seps) + p
        if rng.random() < 0.1:
            s = rng.choice(WHITESPACE) + s
        if rng.random() < 0.1:
            s = s + rng.choice(WHITESPACE)
        out.append(s.replace("\x00", ""))
    return out


def training_lines(n, seed=99):
    """Text to train the test tokenizers on: English, the sample sentences (also NFD / NFKC) and code,
    no random characters (so the test corpus still meets unknown characters)."""
    rng = random.Random(seed)
    fortunes = _fortunes()
    out = []
    for _ in range(n):
        k = rng.random()
        if k < 0.6:
            out.append(_case(rng, rng.choice(fortunes)))
        elif k < 0.85:
            s = rng.choice(SENTENCES)
            out.append(unicodedata.normalize(rng.choice(("NFC", "NFD", "NFKC")), s))
        elif k < 0.95:
            out.append(rng.choice(CODE))
        else:
            out.append(_number(rng) + " " + "".join(rng.choice(EMOJI) for _ in range(3)))
    return out


def pairs(lines):
    """Pairs (a, b) of consecutive lines (for cross-encoder style inputs)."""
    return [(lines[i], lines[(i + 1) % len(lines)]) for i in range(len(lines))]


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    out = sys.argv[2] if len(sys.argv) > 2 else "-"
    f = sys.stdout if out == "-" else open(out, "w", encoding="utf-8")
    for s in corpus(n):
        f.write(json.dumps(s, ensure_ascii=False) + "\n")
    if f is not sys.stdout:
        f.close()
