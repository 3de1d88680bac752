/* test_bpe.c - GPT-2 byte-level BPE tokenizer (examples/common/bpe.c).
   Cases that need ../shared/data/gpt2 (ATTNKIT_DATA_DIR, or $WT2_DIR) skip without it;
   the others use small in-memory vocabularies. The full WikiText-2 reference-id checks
   are in test_data.c. */
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "../examples/common/bpe.c"
#include "attnkit_test.h"

#include <time.h>
#include <unistd.h>

static bpe_tokenizer *g_gpt2;      /* NULL when the data directory is absent */
static char g_gpt2_err[1024];

static bpe_tokenizer *gpt2(void) { return g_gpt2; }

/* start of the line before the final newline at s[end] (the last line of a file) */
static const unsigned char *memrchr_compat(const unsigned char *s, size_t end)
{
    size_t i = end;
    while (i > 0 && s[i - 1] != '\n') i--;
    return s + (i ? i - 1 : 0);
}

/* ---- helpers */

static void roundtrip(bpe_tokenizer *t, const unsigned char *s, size_t n);
static void random_text(unsigned char *s, size_t n, int mode);

static void fill_ids(bpe_tokenizer *t, const char *s, size_t n, bpe_ids *ids)
{
    ids->n = 0;
    CHECK_INT_EQ(bpe_encode(t, s, n, ids), BPE_OK);
}

static int ids_equal(const bpe_ids *ids, const int *ref, size_t n)
{
    size_t i;
    if (ids->n != n) return 0;
    for (i = 0; i < n; i++)
        if (ids->data[i] != ref[i]) return 0;
    return 1;
}

static void print_ids(const char *what, const bpe_ids *ids)
{
    size_t i;
    fprintf(stderr, "    %s:", what);
    for (i = 0; i < ids->n && i < 40; i++) fprintf(stderr, " %d", (int)ids->data[i]);
    fprintf(stderr, "\n");
}

#define CHECK_ENCODES(tok, str, ...)                                            \
    do {                                                                        \
        static const int ref_[] = {__VA_ARGS__};                                \
        bpe_ids got_ = {0};                                                     \
        fill_ids(tok, str, sizeof(str) - 1, &got_);                             \
        CHECK(ids_equal(&got_, ref_, sizeof ref_ / sizeof ref_[0]));            \
        if (!ids_equal(&got_, ref_, sizeof ref_ / sizeof ref_[0])) print_ids(str, &got_); \
        bpe_ids_free(&got_);                                                    \
    } while (0)

/* A JSON encoder for a vocabulary: the 256 single bytes (ids 0..255, in the GPT-2 byte
   alphabet, as \u escapes) then extra tokens (written as raw UTF-8 in that alphabet,
   i.e. the caller passes strings whose bytes are all printable ASCII). */
static void make_json(bpe_bytes *js, const char **extra, int nextra)
{
    uint32_t cp_of_byte[256];
    int16_t byte_of_cp[324];
    char item[64];
    int b, k, n;
    bpe__byte_alphabet(cp_of_byte, byte_of_cp);
    js->n = 0;
    bpe_bytes_append(js, "{", 1);
    for (b = 0; b < 256; b++) {
        n = snprintf(item, sizeof item, "%s\"\\u%04x\": %d", b ? ",\n " : "", (unsigned)cp_of_byte[b], b);
        bpe_bytes_append(js, item, (size_t)n);
    }
    for (k = 0; k < nextra; k++) {
        bpe_bytes_append(js, ", \"", 3);
        bpe_bytes_append(js, extra[k], strlen(extra[k]));
        n = snprintf(item, sizeof item, "\": %d", 256 + k);
        bpe_bytes_append(js, item, (size_t)n);
    }
    bpe_bytes_append(js, "}\n", 2);
}

static bpe_tokenizer *small_vocab(const char **extra, int nextra, const char *merges)
{
    bpe_bytes js = {0};
    bpe_tokenizer *t = NULL;
    char err[256];
    int rc;
    make_json(&js, extra, nextra);
    rc = bpe_load_mem(&t, (const char *)js.data, js.n, merges, strlen(merges), err, sizeof err);
    if (rc != BPE_OK) fprintf(stderr, "    small_vocab: %s\n", err);
    CHECK_INT_EQ(rc, BPE_OK);
    bpe_bytes_free(&js);
    return t;
}

/* ---- cases */

static void test_unicode_table(void)
{
    uint32_t c;
    /* the ASCII fast path agrees with the generated table */
    for (c = 0; c < 128; c++) CHECK_INT_EQ(bpe__ascii_cls[c], bpe_codepoint_class(c));
    /* ranges sorted and disjoint */
    for (c = 1; c < BPE_UC_NRANGES; c++) CHECK(bpe_uc_ranges[c].lo > bpe_uc_ranges[c - 1].hi);
    CHECK_INT_EQ(bpe_codepoint_class('a'), BPE_UC_LETTER);
    CHECK_INT_EQ(bpe_codepoint_class('7'), BPE_UC_NUMBER);
    CHECK_INT_EQ(bpe_codepoint_class('\''), BPE_UC_OTHER);
    CHECK_INT_EQ(bpe_codepoint_class(0xE9), BPE_UC_LETTER);   /* e acute, Ll */
    CHECK_INT_EQ(bpe_codepoint_class(0xAA), BPE_UC_LETTER);   /* feminine ordinal, Lo */
    CHECK_INT_EQ(bpe_codepoint_class(0x2B0), BPE_UC_LETTER);  /* modifier h, Lm */
    CHECK_INT_EQ(bpe_codepoint_class(0x1C5), BPE_UC_LETTER);  /* Dz digraph, Lt */
    CHECK_INT_EQ(bpe_codepoint_class(0x4E00), BPE_UC_LETTER); /* CJK (a First/Last range) */
    CHECK_INT_EQ(bpe_codepoint_class(0x20000), BPE_UC_LETTER);/* CJK extension B */
    CHECK_INT_EQ(bpe_codepoint_class(0xAC00), BPE_UC_LETTER); /* Hangul syllable range */
    CHECK_INT_EQ(bpe_codepoint_class(0x0660), BPE_UC_NUMBER); /* Arabic-Indic zero, Nd */
    CHECK_INT_EQ(bpe_codepoint_class(0xB2), BPE_UC_NUMBER);   /* superscript two, No */
    CHECK_INT_EQ(bpe_codepoint_class(0x2167), BPE_UC_NUMBER); /* Roman numeral eight, Nl */
    CHECK_INT_EQ(bpe_codepoint_class(0xA0), BPE_UC_SPACE);
    CHECK_INT_EQ(bpe_codepoint_class(0x85), BPE_UC_SPACE);
    CHECK_INT_EQ(bpe_codepoint_class(0x3000), BPE_UC_SPACE);
    CHECK_INT_EQ(bpe_codepoint_class(0x2028), BPE_UC_SPACE);
    CHECK_INT_EQ(bpe_codepoint_class(0x200B), BPE_UC_OTHER);  /* zero width space: Cf */
    CHECK_INT_EQ(bpe_codepoint_class(0xFEFF), BPE_UC_OTHER);  /* BOM: not White_Space */
    CHECK_INT_EQ(bpe_codepoint_class(0x1F600), BPE_UC_OTHER); /* emoji, So */
    CHECK_INT_EQ(bpe_codepoint_class(0x10FFFF), BPE_UC_OTHER);
    CHECK_INT_EQ(bpe_codepoint_class(0xFFFFFFFFu), BPE_UC_OTHER);
    CHECK(strcmp(bpe_unicode_version(), "15.0.0") == 0);
}

static void test_byte_alphabet(void)
{
    uint32_t cp[256];
    int16_t inv[324];
    int b, seen = 0;
    bpe__byte_alphabet(cp, inv);
    CHECK_INT_EQ(cp['!'], '!');
    CHECK_INT_EQ(cp[' '], 0x120);  /* the familiar G-dot */
    CHECK_INT_EQ(cp['\n'], 0x10A);
    CHECK_INT_EQ(cp[0], 0x100);
    CHECK_INT_EQ(cp[127], 0x121);
    CHECK_INT_EQ(cp[173], 0x143);  /* soft hyphen: the last remapped byte */
    CHECK_INT_EQ(cp[0xE9], 0xE9);
    for (b = 0; b < 256; b++) {
        CHECK_INT_EQ(inv[cp[b]], b);
        seen++;
    }
    CHECK_INT_EQ(seen, 256);
}

/* pieces of s, joined by '|' */
static void pieces(const char *s, size_t n, char *out, size_t cap)
{
    size_t p = 0, k = 0;
    while (p < n) {
        size_t e = bpe_next_piece((const unsigned char *)s, n, p);
        if (e <= p || e > n) {
            snprintf(out, cap, "<bad piece end>");
            return;
        }
        if (k && k + 1 < cap) out[k++] = '|';
        while (p < e && k + 1 < cap) out[k++] = s[p++];
        p = e;
    }
    out[k] = 0;
}

#define CHECK_PIECES(str, expect)                                                   \
    do {                                                                            \
        char got_[512];                                                             \
        pieces(str, sizeof(str) - 1, got_, sizeof got_);                            \
        CHECK(strcmp(got_, expect) == 0);                                           \
        if (strcmp(got_, expect) != 0) fprintf(stderr, "    got [%s] want [%s]\n", got_, expect); \
    } while (0)

static void test_pretokenizer(void)
{
    CHECK_PIECES("Hello world", "Hello| world");
    CHECK_PIECES("I'm they'll it's we've you're I'd don't", "I|'m| they|'ll| it|'s| we|'ve| you|'re| I|'d| don|'t");
    CHECK_PIECES("'S 'LL", "'|S| '|LL");          /* contractions are lower case only */
    CHECK_PIECES(" 's", " '|s");                    /* a space cannot prefix a contraction */
    CHECK_PIECES("''s", "''|s");
    CHECK_PIECES("a  b", "a| | b");                 /* whitespace gives its last char away */
    CHECK_PIECES("a   b", "a|  | b");
    CHECK_PIECES("a \n\nb", "a| \n|\n|b");          /* only U+0020 prefixes a word */
    CHECK_PIECES("a\tb", "a|\t|b");
    CHECK_PIECES("x   ", "x|   ");                  /* trailing whitespace stays whole */
    CHECK_PIECES(" = A = \n", " =| A| =| \n");
    CHECK_PIECES("123abc 45 6.7", "123|abc| 45| 6|.|7");
    CHECK_PIECES("!!! ?? a", "!!!| ??| a");
    CHECK_PIECES("caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac", "caf\xc3\xa9| \xe6\x9d\xb1\xe4\xba\xac");
    CHECK_PIECES("x\xc2\xa0y", "x|\xc2\xa0|y");     /* NBSP is \s but does not prefix */
    CHECK_PIECES("\xc2\xb2\xc2\xb3x", "\xc2\xb2\xc2\xb3|x"); /* superscripts are numbers */
    CHECK_PIECES("ab\xff\xfe" "cd", "ab|\xff\xfe|cd");        /* invalid bytes: "other" */
    CHECK_PIECES(" \xff" "a", " \xff|a");
    CHECK_PIECES("\xe2\x82" "a", "\xe2\x82|a");               /* truncated sequence */
    CHECK_PIECES("\xf0\x9f\x98\x80!", "\xf0\x9f\x98\x80!");   /* emoji + ! : one other run */
    CHECK_PIECES(" ", " ");
    CHECK_PIECES("\n", "\n");
    CHECK_PIECES("'", "'");
}

static void test_hello_world(void)
{
    bpe_tokenizer *t = gpt2();
    if (!t) TEST_SKIP(g_gpt2_err);
    CHECK_INT_EQ(bpe_vocab_size(t), 50257);
    CHECK_INT_EQ(bpe_num_merges(t), 50000);
    CHECK_INT_EQ(bpe_eot(t), 50256);
    CHECK_ENCODES(t, "Hello world", 15496, 995);
    CHECK_ENCODES(t, " = Valkyria Chronicles III = \n", 796, 569, 18354, 7496, 17740, 6711, 796, 220, 198);
    /* first row of wt2.test.gpt2.u16 (README) */
    CHECK_ENCODES(t, " = Robert Boulter = \n", 796, 5199, 347, 2852, 353, 796, 220, 198);
    /* single bytes: "!" is id 0, " " is 220, "\n" is 198 */
    CHECK_ENCODES(t, "!", 0);
    CHECK_ENCODES(t, " ", 220);
    CHECK_ENCODES(t, "\n", 198);
    {
        bpe_ids e = {0};
        fill_ids(t, "", 0, &e);
        CHECK_INT_EQ(e.n, 0);
        bpe_ids_free(&e);
    }
}

static void test_special_text_is_ordinary(void)
{
    bpe_tokenizer *t = gpt2();
    bpe_ids ids = {0};
    bpe_bytes back = {0};
    size_t i;
    if (!t) TEST_SKIP(g_gpt2_err);
    /* "<", "|", "end", "of", "text", "|", ">" (tiktoken gpt2 with no special tokens) */
    CHECK_ENCODES(t, "<|endoftext|>", 27, 91, 437, 1659, 5239, 91, 29);
    CHECK_ENCODES(t, "I'm they'll   x\n\n", 40, 1101, 484, 1183, 220, 220, 2124, 628);
    fill_ids(t, "<|endoftext|>", 13, &ids);
    CHECK(ids.n > 1);
    for (i = 0; i < ids.n; i++) CHECK(ids.data[i] != 50256);
    CHECK_INT_EQ(bpe_decode(t, ids.data, ids.n, &back), BPE_OK);
    CHECK(back.n == 13 && memcmp(back.data, "<|endoftext|>", 13) == 0);
    /* but the EOT id decodes to that text */
    back.n = 0;
    {
        int32_t e = 50256;
        CHECK_INT_EQ(bpe_decode(t, &e, 1, &back), BPE_OK);
        CHECK(back.n == 13 && memcmp(back.data, "<|endoftext|>", 13) == 0);
    }
    bpe_ids_free(&ids);
    bpe_bytes_free(&back);
}

static void test_merge_semantics(void)
{
    /* GPT-2's encoder.py merges EVERY occurrence of the lowest-rank pair in one pass.
       Merges ranked "ab a" (0) before "a b" (1): on "abab", one pass of "a b" gives
       [ab, ab] (no "ab a" pair remains); merging one pair at a time would give
       [aba, b]. */
    const char *extra[] = {"ab", "aba", "aa", "aaaa", "he", "ll", "hell", "hello", "\xc4\xa0w"};
    bpe_tokenizer *t = small_vocab(extra, 9, "#version: 0.2\nab a\na b\na a\naa aa\nh e\nl l\nhe ll\nhell o\n\xc4\xa0 w\n");
    if (!t) return;
    CHECK_INT_EQ(bpe_vocab_size(t), 265);
    CHECK_INT_EQ(bpe_num_merges(t), 9);
    CHECK_INT_EQ(bpe_eot(t), -1);
    CHECK_ENCODES(t, "abab", 256, 256);
    CHECK_ENCODES(t, "aba", 257);          /* a b -> ab, then ab a -> aba */
    CHECK_ENCODES(t, "aaa", 258, 'a'); /* aa + a; byte b has id b here */
    CHECK_ENCODES(t, "aaaa", 259);
    CHECK_ENCODES(t, "hello", 263);
    CHECK_ENCODES(t, "hello world", 263, 264, 'o', 'r', 'l', 'd');
    bpe_free(t);
}

/* The array-pass and heap implementations of the merge loop agree (they are chosen by
   word length; heap_min forces one or the other). */
static void test_heap_path(void)
{
    const char *extra[] = {"ab", "aba", "aa", "aaaa", "he", "ll", "hell", "hello", "\xc4\xa0w"};
    bpe_tokenizer *small = small_vocab(extra, 9, "ab a\na b\na a\naa aa\nh e\nl l\nhe ll\nhell o\n\xc4\xa0 w\n");
    bpe_tokenizer *ts[2];
    unsigned char buf[700];
    bpe_ids a = {0}, b = {0};
    int k, it;
    if (!small) return;
    small->heap_min = 2;
    bpe_set_cache_limit(small, 0);
    CHECK_ENCODES(small, "abab", 256, 256);
    CHECK_ENCODES(small, "aba", 257);
    CHECK_ENCODES(small, "aaa", 258, 'a');
    CHECK_ENCODES(small, "aaaaaaaaa", 259, 259, 'a');
    CHECK_ENCODES(small, "hello", 263);
    ts[0] = small;
    ts[1] = gpt2();
    tt_seed(99);
    for (k = 0; k < 2; k++) {
        bpe_tokenizer *t = ts[k];
        size_t save_limit;
        if (!t) continue;
        save_limit = t->cache_limit;
        bpe_set_cache_limit(t, 0);
        for (it = 0; it < 200; it++) {
            size_t n = (size_t)(tt_uniform() * sizeof buf);
            int mode = it % 3;
            if (mode == 2) {
                size_t i;
                for (i = 0; i < n; i++) buf[i] = (unsigned char)("abhelo w="[(int)(tt_uniform() * 9)]);
            } else {
                random_text(buf, n, mode);
            }
            a.n = b.n = 0;
            t->heap_min = 2;
            CHECK_INT_EQ(bpe_encode(t, buf, n, &a), BPE_OK);
            t->heap_min = (size_t)-1;
            CHECK_INT_EQ(bpe_encode(t, buf, n, &b), BPE_OK);
            CHECK(a.n == b.n && (a.n == 0 || memcmp(a.data, b.data, a.n * sizeof(int32_t)) == 0));
        }
        t->heap_min = 128;
        bpe_set_cache_limit(t, save_limit);
    }
    /* one 20,000-byte word of random letters: heap by default, array forced */
    if (ts[1]) {
        bpe_tokenizer *t = ts[1];
        unsigned char *w = (unsigned char *)malloc(20000);
        int i;
        for (i = 0; i < 20000; i++) w[i] = (unsigned char)('a' + (int)(tt_uniform() * 26));
        a.n = b.n = 0;
        CHECK_INT_EQ(bpe_encode(t, w, 20000, &a), BPE_OK);
        t->heap_min = (size_t)-1;
        CHECK_INT_EQ(bpe_encode(t, w, 20000, &b), BPE_OK);
        t->heap_min = 128;
        CHECK(a.n == b.n && memcmp(a.data, b.data, a.n * sizeof(int32_t)) == 0);
        roundtrip(t, w, 20000);
        free(w);
    }
    bpe_ids_free(&a);
    bpe_ids_free(&b);
    bpe_free(small);
}

static void roundtrip(bpe_tokenizer *t, const unsigned char *s, size_t n)
{
    bpe_ids ids = {0};
    bpe_bytes back = {0};
    size_t i;
    int ok = 1;
    CHECK_INT_EQ(bpe_encode(t, s, n, &ids), BPE_OK);
    for (i = 0; i < ids.n; i++)
        if (ids.data[i] < 0 || ids.data[i] >= bpe_vocab_size(t)) ok = 0;
    CHECK(ok);
    CHECK_INT_EQ(bpe_decode(t, ids.data, ids.n, &back), BPE_OK);
    CHECK(back.n == n && (n == 0 || memcmp(back.data, s, n) == 0));
    CHECK(ids.n <= n); /* never more ids than bytes */
    bpe_ids_free(&ids);
    bpe_bytes_free(&back);
}

static void random_text(unsigned char *s, size_t n, int mode)
{
    static const char *frags[] = {"the", " of", " and", "'s", "'ll", " ", "  ", "\n", "\t", "1", "23",
                                  ".", ",", "!", "\xc3\xa9", "\xe6\x9d\xb1", "\xf0\x9f\x98\x80",
                                  "\xc2\xa0", "\xe3\x80\x80", "\xff", "\xc3", "\xe2\x82", "\xed\xa0\x80",
                                  "\xc0\xaf", "\xf4\x90\x80\x80", "\x00", " @-@ "};
    size_t i = 0;
    while (i < n) {
        if (mode == 0) {
            s[i++] = (unsigned char)(tt_uniform() * 256.0);
        } else {
            const char *f = frags[(int)(tt_uniform() * (sizeof frags / sizeof frags[0]))];
            size_t l = strlen(f), k;
            if (l == 0) l = 1; /* the "\x00" fragment */
            for (k = 0; k < l && i < n; k++) s[i++] = (unsigned char)f[k];
        }
    }
}

static void test_roundtrip_random(void)
{
    const char *extra[] = {"he", "ll", "hell", "hello", "\xc4\xa0w"};
    bpe_tokenizer *small = small_vocab(extra, 5, "h e\nl l\nhe ll\nhell o\n\xc4\xa0 w\n");
    bpe_tokenizer *ts[2];
    unsigned char buf[600];
    int k, it;
    ts[0] = small;
    ts[1] = gpt2();
    tt_seed(7);
    for (k = 0; k < 2; k++) {
        if (!ts[k]) continue;
        for (it = 0; it < 300; it++) {
            size_t n = (size_t)(tt_uniform() * sizeof buf);
            random_text(buf, n, it % 2);
            roundtrip(ts[k], buf, n);
        }
        roundtrip(ts[k], (const unsigned char *)"", 0);
        /* every single byte and every byte pair */
        for (it = 0; it < 256; it++) {
            buf[0] = (unsigned char)it;
            buf[1] = (unsigned char)(255 - it);
            roundtrip(ts[k], buf, 1);
            roundtrip(ts[k], buf, 2);
        }
    }
    /* a long run of one character (a single 5000-byte piece) */
    memset(buf, '=', sizeof buf);
    if (ts[1]) roundtrip(ts[1], buf, sizeof buf);
    bpe_free(small);
}

static void test_cache_equivalence(void)
{
    bpe_tokenizer *t = gpt2();
    bpe_tokenizer *nc = NULL;
    bpe_ids a = {0}, b = {0};
    unsigned char buf[3000];
    char err[256];
    int it;
    size_t hits, misses;
    if (!t) TEST_SKIP(g_gpt2_err);
    CHECK_INT_EQ(bpe_load_dir(&nc, NULL, err, sizeof err), BPE_OK);
    if (!nc) return;
    bpe_set_cache_limit(nc, 0);
    bpe_set_cache_limit(t, 4096); /* tiny: flushed often */
    tt_seed(11);
    for (it = 0; it < 60; it++) {
        random_text(buf, sizeof buf, 1);
        a.n = b.n = 0;
        CHECK_INT_EQ(bpe_encode(t, buf, sizeof buf, &a), BPE_OK);
        CHECK_INT_EQ(bpe_encode(nc, buf, sizeof buf, &b), BPE_OK);
        CHECK(a.n == b.n && memcmp(a.data, b.data, a.n * sizeof(int32_t)) == 0);
    }
    bpe_cache_stats(t, &hits, &misses);
    CHECK(hits > 0);
    bpe_cache_stats(nc, &hits, &misses);
    CHECK_INT_EQ(hits, 0);
    bpe_set_cache_limit(t, (size_t)64 << 20);
    bpe_ids_free(&a);
    bpe_ids_free(&b);
    bpe_free(nc);
}

typedef struct { const char *json, *merges; int code; const char *msg; } bad_case;

static void test_malformed_vocab(void)
{
    /* valid 256-byte JSON prefix/suffix are built around each case's tokens */
    static const bad_case cases[] = {
        {"", "", BPE_EFORMAT, "expected '{'"},
        {"{", "", BPE_EFORMAT, "encoder.json"},
        {"{}", "", BPE_EFORMAT, "empty object"},
        {"[]", "", BPE_EFORMAT, "expected '{'"},
        {"{\"a\": 0", "", BPE_EFORMAT, "truncated"},
        {"{\"a\" 0}", "", BPE_EFORMAT, "expected ':'"},
        {"{\"a\": -1}", "", BPE_EFORMAT, "negative"},
        {"{\"a\": 0.5}", "", BPE_EFORMAT, "non-integer"},
        {"{\"a\": 1e3}", "", BPE_EFORMAT, "non-integer"},
        {"{\"a\": 00}", "", BPE_EFORMAT, "leading zero"},
        {"{\"a\": \"0\"}", "", BPE_EFORMAT, "integer"},
        {"{\"a\": 99999999999}", "", BPE_ERANGE, "too large"},
        {"{\"a\": 0, \"a\": 1}", "", BPE_EFORMAT, "duplicate token"},
        {"{\"a\": 0, \"\\u0061\": 1}", "", BPE_EFORMAT, "duplicate token"},
        {"{\"a\": 0, \"b\": 0}", "", BPE_EFORMAT, "not dense"},
        {"{\"a\": 0, \"b\": 2}", "", BPE_EFORMAT, "not dense"},
        {"{\"\\ud800\": 0}", "", BPE_EFORMAT, "unpaired high surrogate"},
        {"{\"\\ud800\\u0041\": 0}", "", BPE_EFORMAT, "unpaired high surrogate"},
        {"{\"\\udc00\": 0}", "", BPE_EFORMAT, "unpaired low surrogate"},
        {"{\"\\ud83d\\ude00\": 0}", "", BPE_EFORMAT, "U+1F600 outside"}, /* valid pair, not in alphabet */
        {"{\"\\q\": 0}", "", BPE_EFORMAT, "invalid escape"},
        {"{\"\\u12\": 0}", "", BPE_EFORMAT, "bad \\u escape"},
        {"{\"\\u12G4\": 0}", "", BPE_EFORMAT, "bad \\u escape"},
        {"{\"a\\", "", BPE_EFORMAT, "truncated escape"},
        {"{\"abc", "", BPE_EFORMAT, "unterminated string"},
        {"{\"a\nb\": 0}", "", BPE_EFORMAT, "control character"},
        {"{\"\xff\": 0}", "", BPE_EFORMAT, "invalid UTF-8"},
        {"{\"\xc3\": 0}", "", BPE_EFORMAT, "invalid UTF-8"},
        {"{\" \": 0}", "", BPE_EFORMAT, "outside the GPT-2 byte alphabet"}, /* raw space */
        {"{\"\": 0}", "", BPE_EFORMAT, "empty token"},
        {"{\"a\": 0} x", "", BPE_EFORMAT, "trailing data"},
        {"{\"a\": 0,}", "", BPE_EFORMAT, "expected '\"'"},
        {"{\"a\": 0}", "", BPE_EFORMAT, "no token for byte"},
    };
    size_t i;
    char err[256];
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bpe_tokenizer *t = (bpe_tokenizer *)&err; /* must be reset to NULL */
        int rc;
        err[0] = 0;
        rc = bpe_load_mem(&t, cases[i].json, strlen(cases[i].json), cases[i].merges,
                          strlen(cases[i].merges), err, sizeof err);
        CHECK_INT_EQ(rc, cases[i].code);
        CHECK(t == NULL);
        CHECK(strstr(err, cases[i].msg) != NULL);
        if (rc != cases[i].code || !strstr(err, cases[i].msg))
            fprintf(stderr, "    case %zu: rc %d, message \"%s\"\n", i, rc, err);
    }
}

static void test_malformed_merges(void)
{
    static const struct { const char *merges, *msg; } cases[] = {
        {"h e\nhe\n", "line 2: expected two tokens"},
        {"h  e\n", "line 1: expected two tokens"},
        {"h e \n", "line 1: expected two tokens"},
        {" h e\n", "line 1: expected two tokens"},
        {"h e\nx y\n", "line 2: merged token not in encoder.json"},
        {"h Q\xff\n", "right token not in encoder.json"},
        {"\xc4\xa0\xc4\xa0 e\n", "left token not in encoder.json"},
        {"h e\nh e\n", "line 2: duplicate merge"},
        {"#version: 0.2\nh e\nl l\n#comment x\n", "line 4"},
    };
    const char *extra[] = {"he", "ll"};
    bpe_bytes js = {0};
    char err[256];
    size_t i;
    make_json(&js, extra, 2);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bpe_tokenizer *t = NULL;
        int rc = bpe_load_mem(&t, (const char *)js.data, js.n, cases[i].merges, strlen(cases[i].merges), err,
                              sizeof err);
        CHECK_INT_EQ(rc, BPE_EFORMAT);
        CHECK(t == NULL);
        CHECK(strstr(err, cases[i].msg) != NULL);
        if (!strstr(err, cases[i].msg)) fprintf(stderr, "    merges case %zu: \"%s\"\n", i, err);
    }
    /* a NUL inside a merge token must not match a shorter token (fuzz_json finding:
       "h\0x e" was read as "h e" and merged h+e into "h", losing bytes) */
    {
        static const char nul[] = "h\0x e\n";
        bpe_tokenizer *t = NULL;
        int rc = bpe_load_mem(&t, (const char *)js.data, js.n, nul, sizeof nul - 1, err, sizeof err);
        CHECK_INT_EQ(rc, BPE_EFORMAT);
        CHECK(t == NULL && strstr(err, "left token not in encoder.json") != NULL);
        rc = bpe_load_mem(&t, (const char *)js.data, js.n, "h e\0\n", 5, err, sizeof err);
        CHECK_INT_EQ(rc, BPE_EFORMAT);
        CHECK(t == NULL && strstr(err, "right token not in encoder.json") != NULL);
    }
    /* accepted variations: CRLF line ends, no final newline, blank lines, no #version */
    {
        const char *ok[] = {"#version: 0.2\r\nh e\r\nl l\r\n", "h e\nl l", "h e\n\n\nl l\n\n", ""};
        for (i = 0; i < 4; i++) {
            bpe_tokenizer *t = NULL;
            int rc = bpe_load_mem(&t, (const char *)js.data, js.n, ok[i], strlen(ok[i]), err, sizeof err);
            CHECK_INT_EQ(rc, BPE_OK);
            if (t) CHECK_INT_EQ(bpe_num_merges(t), i == 3 ? 0 : 2);
            bpe_free(t);
        }
    }
    bpe_bytes_free(&js);
}

static void test_files(void)
{
    bpe_tokenizer *t = (bpe_tokenizer *)&t;
    char err[1024], p1[1100], p2[1100];
    unsigned char *js = NULL, *mg = NULL;
    size_t jl = 0, ml = 0;
    int rc;
    /* missing directory / files */
    rc = bpe_load_dir(&t, "/nonexistent/attnkit-test-dir", err, sizeof err);
    CHECK_INT_EQ(rc, BPE_EIO);
    CHECK(t == NULL);
    CHECK(strstr(err, "/nonexistent/attnkit-test-dir/encoder.json") != NULL);
    CHECK_INT_EQ(bpe_load(&t, NULL, "x", err, sizeof err), BPE_EINVAL);
    CHECK_INT_EQ(bpe_load_mem(NULL, "{}", 2, "", 0, err, sizeof err), BPE_EINVAL);
    CHECK_INT_EQ(bpe_load_mem(&t, NULL, 5, "", 0, NULL, 0), BPE_EINVAL);
    if (!gpt2()) TEST_SKIP(g_gpt2_err);
    /* truncated copies of the real files */
    snprintf(p1, sizeof p1, "%s/gpt2/encoder.json", bpe_default_data_dir());
    snprintf(p2, sizeof p2, "%s/gpt2/vocab.bpe", bpe_default_data_dir());
    CHECK_INT_EQ(bpe_read_file(p1, 1000, &js, &jl, err, sizeof err), BPE_ERANGE); /* over the limit */
    CHECK(js == NULL && jl == 0 && strstr(err, "larger than 1000 bytes") != NULL);
    CHECK_INT_EQ(bpe_read_file(p1, (size_t)1 << 30, &js, &jl, err, sizeof err), BPE_OK);
    CHECK_INT_EQ(bpe_read_file(p2, (size_t)1 << 30, &mg, &ml, err, sizeof err), BPE_OK);
    if (!js || !mg) return;
    CHECK_INT_EQ(jl, 1042301);
    {
        size_t cuts[] = {1, 100, jl / 2, jl - 2, jl - 1};
        size_t i;
        for (i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            t = NULL;
            err[0] = 0;
            rc = bpe_load_mem(&t, (const char *)js, cuts[i], (const char *)mg, ml, err, sizeof err);
            CHECK_INT_EQ(rc, BPE_EFORMAT);
            CHECK(t == NULL && err[0] != 0);
        }
        /* vocab.bpe cut at a line end: fewer merges, still valid; cut inside a line: the
           partial last line is either a valid merge or an error, never a crash */
        {
            const char *half = (const char *)memchr(mg + ml / 2, '\n', ml / 2);
            size_t hl = half ? (size_t)(half - (const char *)mg) + 1 : ml;
            rc = bpe_load_mem(&t, (const char *)js, jl, (const char *)mg, hl, err, sizeof err);
            CHECK_INT_EQ(rc, BPE_OK);
            if (t) CHECK(bpe_num_merges(t) > 20000 && bpe_num_merges(t) < 30000);
            bpe_free(t);
            for (i = 1; i < 6; i++) {
                t = NULL;
                rc = bpe_load_mem(&t, (const char *)js, jl, (const char *)mg, hl + i, err, sizeof err);
                CHECK(rc == BPE_OK || (rc == BPE_EFORMAT && strstr(err, "vocab.bpe line") != NULL));
                bpe_free(t);
            }
        }
        /* a corrupted token in the middle */
        {
            unsigned char *bad = (unsigned char *)malloc(jl);
            const char *k;
            memcpy(bad, js, jl);
            k = strstr((const char *)bad + 500000, "\": ");
            if (k) bad[k - (const char *)bad] = 'x'; /* close-quote becomes part of the key */
            t = NULL;
            rc = bpe_load_mem(&t, (const char *)bad, jl, (const char *)mg, ml, err, sizeof err);
            CHECK(rc == BPE_EFORMAT && t == NULL);
            free(bad);
        }
    }
    free(js);
    free(mg);
}

/* A merges FILE must be whole (bpe_load): empty, without its #version line, cut inside
   its last line or cut at a line end (fewer merges than encoder.json needs) are refused,
   naming the file. */
static void test_merges_file_checked(void)
{
    char err[2048], ej[1100], vb[1100], tmp[1300];
    unsigned char *mg = NULL;
    size_t ml = 0, half;
    const char *td = getenv("TMPDIR");
    bpe_tokenizer *t = NULL;
    int i, rc;
    if (!gpt2()) TEST_SKIP(g_gpt2_err);
    snprintf(ej, sizeof ej, "%s/gpt2/encoder.json", bpe_default_data_dir());
    snprintf(vb, sizeof vb, "%s/gpt2/vocab.bpe", bpe_default_data_dir());
    /* the pid keeps two runs at once (the OpenMP and no-OpenMP builds side by side in
       `make test`) apart */
    snprintf(tmp, sizeof tmp, "%s/attnkit_bpe_%ld_%lu_%p.bpe", td && *td ? td : "/tmp", (long)getpid(),
             (unsigned long)time(NULL), (void *)&t);
    CHECK_INT_EQ(bpe_read_file(vb, (size_t)1 << 30, &mg, &ml, err, sizeof err), BPE_OK);
    if (!mg) return;
    half = (size_t)((const unsigned char *)memchr(mg + ml / 2, '\n', ml / 2) - mg) + 1;
    for (i = 0; i < 6; i++) {
        /* 0 whole, 1 empty, 2 half (at a line end), 3 cut inside the last line,
           4 without the #version line, 5 without the last merge */
        size_t off = 0, n = ml;
        FILE *f;
        if (i == 1) n = 0;
        if (i == 2) n = half;
        if (i == 3) n = ml - 3;
        if (i == 4) {
            off = (size_t)((const unsigned char *)memchr(mg, '\n', ml) - mg) + 1;
            n = ml - off;
        }
        if (i == 5) n = (size_t)((const unsigned char *)memrchr_compat(mg, ml - 1) - mg) + 1;
        f = fopen(tmp, "wb");
        CHECK(f != NULL);
        if (!f) break;
        CHECK(n == 0 || fwrite(mg + off, 1, n, f) == n);
        CHECK(fclose(f) == 0);
        t = NULL;
        err[0] = 0;
        rc = bpe_load(&t, ej, tmp, err, sizeof err);
        if (i == 0) {
            CHECK_INT_EQ(rc, BPE_OK);
            CHECK(t != NULL && bpe_num_merges(t) == 50000);
        } else {
            CHECK_INT_EQ(rc, BPE_EFORMAT);
            CHECK(t == NULL && strstr(err, tmp) != NULL);
        }
        if (i == 1 || i == 4) CHECK(strstr(err, "#version") != NULL);
        if (i == 3) CHECK(strstr(err, "truncated") != NULL);
        if (i == 2 || i == 5) CHECK(strstr(err, "merges, but the 50257 tokens") != NULL);
        bpe_free(t);
    }
    remove(tmp);
    free(mg);
}

/* A pathological pre-token is merged in chunks of at most max_piece bytes, cut before a
   UTF-8 continuation byte: its ids are those of the chunks, decode gives the text back,
   and under the cap nothing changes. */
static void test_long_piece_capped(void)
{
    bpe_tokenizer *t = gpt2();
    size_t n = 200000, i;
    unsigned char *s;
    bpe_ids a = {0}, b = {0};
    bpe_bytes d = {0};
    if (!t) TEST_SKIP(g_gpt2_err);
    s = (unsigned char *)malloc(n);
    for (i = 0; i < n; i++) s[i] = (unsigned char)"etaoinshrdlu"[(i * 7 + i / 13) % 12];
    /* default cap (64 KiB): the 200,000 letters are one piece, merged as 4 chunks */
    CHECK_INT_EQ(bpe_encode(t, s, n, &a), BPE_OK);
    for (i = 0; i < n; i += BPE_MAX_PIECE_DEFAULT)
        CHECK_INT_EQ(bpe_encode(t, s + i, n - i < BPE_MAX_PIECE_DEFAULT ? n - i : BPE_MAX_PIECE_DEFAULT, &b), BPE_OK);
    CHECK(a.n == b.n && a.n > 0 && memcmp(a.data, b.data, a.n * sizeof(int32_t)) == 0);
    CHECK_INT_EQ(bpe_decode(t, a.data, a.n, &d), BPE_OK);
    CHECK(d.n == n && memcmp(d.data, s, n) == 0);
    /* no cap: one piece; ids differ from the chunked ones only around the cuts */
    a.n = 0;
    bpe_set_max_piece(t, 0);
    CHECK_INT_EQ(bpe_encode(t, s, 3000, &a), BPE_OK);
    b.n = 0;
    bpe_set_max_piece(t, 3000); /* exactly the piece: no chunking */
    CHECK_INT_EQ(bpe_encode(t, s, 3000, &b), BPE_OK);
    CHECK(a.n == b.n && memcmp(a.data, b.data, a.n * sizeof(int32_t)) == 0);
    /* a cut inside a two-byte letter moves back to its first byte: 1001 x "\xc3\xa9" with
       a cap of 1001 bytes is merged as 500 + 501 letters */
    for (i = 0; i < 2002; i += 2) {
        s[i] = 0xC3;
        s[i + 1] = 0xA9;
    }
    a.n = b.n = 0;
    bpe_set_max_piece(t, 1001);
    CHECK_INT_EQ(bpe_encode(t, s, 2002, &a), BPE_OK);
    bpe_set_max_piece(t, 0);
    CHECK_INT_EQ(bpe_encode(t, s, 1000, &b), BPE_OK);
    CHECK_INT_EQ(bpe_encode(t, s + 1000, 1002, &b), BPE_OK);
    CHECK(a.n == b.n && memcmp(a.data, b.data, a.n * sizeof(int32_t)) == 0);
    d.n = 0;
    CHECK_INT_EQ(bpe_decode(t, a.data, a.n, &d), BPE_OK);
    CHECK(d.n == 2002 && memcmp(d.data, s, 2002) == 0);
    bpe_set_max_piece(t, BPE_MAX_PIECE_DEFAULT);
    bpe_ids_free(&a);
    bpe_ids_free(&b);
    bpe_bytes_free(&d);
    free(s);
}

static void test_api_errors(void)
{
    const char *extra[] = {"he"};
    bpe_tokenizer *t = small_vocab(extra, 1, "h e\n");
    bpe_ids ids = {0};
    bpe_bytes b = {0};
    int32_t bad[3] = {5, 257, -1};
    size_t l = 99;
    if (!t) return;
    CHECK_INT_EQ(bpe_encode(NULL, "a", 1, &ids), BPE_EINVAL);
    CHECK_INT_EQ(bpe_encode(t, NULL, 1, &ids), BPE_EINVAL);
    CHECK_INT_EQ(bpe_encode(t, "a", 1, NULL), BPE_EINVAL);
    CHECK_INT_EQ(bpe_encode(t, NULL, 0, &ids), BPE_OK);
    CHECK_INT_EQ(ids.n, 0);
    CHECK_INT_EQ(bpe_decode(t, bad, 1, &b), BPE_OK);
    CHECK_INT_EQ(bpe_decode(t, bad + 1, 1, &b), BPE_ERANGE);
    CHECK_INT_EQ(bpe_decode(t, bad + 2, 1, &b), BPE_ERANGE);
    CHECK_INT_EQ(bpe_decode(t, NULL, 1, &b), BPE_EINVAL);
    CHECK_INT_EQ(bpe_decode(NULL, bad, 1, &b), BPE_EINVAL);
    CHECK(bpe_token_bytes(t, 256, &l) != NULL && l == 2);
    CHECK(bpe_token_bytes(t, 257, &l) == NULL && l == 0);
    CHECK(bpe_token_bytes(NULL, 0, NULL) == NULL);
    CHECK_INT_EQ(bpe_vocab_size(NULL), 0);
    CHECK_INT_EQ(bpe_eot(NULL), -1);
    CHECK(strcmp(bpe_strerror(BPE_EFORMAT), "malformed file") == 0);
    CHECK(strcmp(bpe_strerror(12345), "unknown error") == 0);
    CHECK_INT_EQ(bpe_ids_push(NULL, 1), BPE_EINVAL);
    CHECK_INT_EQ(bpe_bytes_append(&b, NULL, 3), BPE_EINVAL);
    CHECK(bpe_next_piece(NULL, 3, 0) == 3);
    bpe_free(NULL);
    bpe_ids_free(&ids);
    bpe_bytes_free(&b);
    bpe_free(t);
}

int main(int argc, char **argv)
{
    int rc;
    TEST_INIT(argc, argv);
    rc = bpe_load_dir(&g_gpt2, NULL, g_gpt2_err, sizeof g_gpt2_err);
    if (rc != BPE_OK) {
        char tmp[1200];
        snprintf(tmp, sizeof tmp, "GPT-2 vocabulary not available (%s); set WT2_DIR", g_gpt2_err);
        memcpy(g_gpt2_err, tmp, sizeof g_gpt2_err - 1);
        g_gpt2_err[sizeof g_gpt2_err - 1] = 0;
        g_gpt2 = NULL;
    }
    TEST_RUN(test_unicode_table);
    TEST_RUN(test_byte_alphabet);
    TEST_RUN(test_pretokenizer);
    TEST_RUN(test_hello_world);
    TEST_RUN(test_special_text_is_ordinary);
    TEST_RUN(test_merge_semantics);
    TEST_RUN(test_roundtrip_random);
    TEST_RUN(test_heap_path);
    TEST_RUN(test_cache_equivalence);
    TEST_RUN(test_malformed_vocab);
    TEST_RUN(test_malformed_merges);
    TEST_RUN(test_files);
    TEST_RUN(test_merges_file_checked);
    TEST_RUN(test_long_piece_capped);
    TEST_RUN(test_api_errors);
    bpe_free(g_gpt2);
    return TEST_END();
}
