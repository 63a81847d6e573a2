# wisp build. `make` builds build/wisp; `make test` installs deps, builds, runs the
# suite normally and then under AddressSanitizer + UndefinedBehaviorSanitizer;
# `make run` builds and generates text with the built-in default model;
# `make install PREFIX=DIR` installs the CLI, the library (static and shared),
# wisp.h, wisp.pc, the default model and the Dawn library (docs/install.md).
#
# Every .c under src/ is compiled; adding a file needs no edit here.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
# Every object is position-independent, so that libwisp.so links the very
# objects libwisp.a and the CLI are made of and `make lib` (which the
# optimised half of `make test` builds) compiles nothing more. With
# -fno-semantic-interposition a call to a function of the same file may be
# inlined, as in the default (PIE) code; nothing is meant to interpose the
# library's functions (it exports only wisp.h's).
PIC     = -fPIC -fno-semantic-interposition
CFLAGS_BASE = -std=c11 -Wall -Wextra -Werror -g $(OPT) $(SAN) $(PIC) -D_GNU_SOURCE \
              -Iinclude -Isrc -I/usr/include/cjson -pthread -fno-strict-aliasing
LDLIBS  = -lcjson -lpcre2-8 -lutf8proc -lcrypto -lmicrohttpd -lm -ldl -pthread
# glibc's vector math library (libmvec, part of libc6 on x86-64) gives the
# CPU kernels a vector expf (cpu_kernels.c); used only where the toolchain
# links it, so a build elsewhere keeps the scalar expf.
HAVE_LIBMVEC := $(shell printf 'int main(void){return 0;}\n' | $(CC) -x c - -lmvec -o /dev/null 2>/dev/null && echo 1)
ifeq ($(HAVE_LIBMVEC),1)
CFLAGS_BASE += -DWISP_HAVE_LIBMVEC
LDLIBS  += -lmvec
endif

LIB_SRC  := $(shell find src -name '*.c' ! -path 'src/cli/main.c' | sort)
CLI_SRC  := src/cli/main.c
TEST_SRC := $(shell find tests -maxdepth 1 -name '*.c' | sort)
# WGSL kernels are embedded into the library as a generated C file.
WGSL_SRC := $(sort $(wildcard src/backend/webgpu/kernels/*.wgsl))
GEN_WGSL := $(BUILD)/gen/wgsl_kernels.c
# The registry, the profiles and the WGSL sources are built in verbatim
# (src/util/builtin.h), so the binary reads none of them from disk.
DATA_SRC := kernels/registry.json $(sort $(wildcard profiles/*.json)) \
            $(sort $(wildcard src/backend/webgpu/kernels/*.wgsl src/backend/webgpu/kernels/*.wgsli)) \
            src/server/chat.html
GEN_DATA := $(BUILD)/gen/builtin_data.c
GEN_OBJ  := $(BUILD)/obj/gen/wgsl_kernels.o $(BUILD)/obj/gen/builtin_data.o

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o)
# the probes under tools/ too, so that a changed header rebuilds them
TOOL_OBJ := $(patsubst tools/%.c,$(BUILD)/obj/tools/%.o,$(wildcard tools/*.c))
DEPS     := $(GEN_OBJ:.o=.d) $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(TOOL_OBJ:.o=.d)
PREFIX  ?= /usr/local

DEFAULT_MODEL ?= models/synthetic-seed

.PHONY: all deps test test-plain test-san run bench clean fuzz fuzz-build fuzz-smoke lib install

all: $(BUILD)/wisp $(BUILD)/wisp_tests $(BUILD)/grid_probe $(BUILD)/phase_probe $(BUILD)/stream_probe $(BUILD)/seq_probe $(BUILD)/sched_probe $(BUILD)/prod_probe

deps:
	@scripts/deps.sh

# Every object depends on a stamp named after the compiler and its flags, so
# that a tree built with other flags (OPT, SAN, PIC) is compiled again, not
# linked from objects of both kinds.
FLAGS_STAMP := $(BUILD)/gen/flags-$(shell printf '%s' '$(CC) $(CFLAGS_BASE)' | sha256sum | cut -c1-16)
$(FLAGS_STAMP):
	@mkdir -p $(dir $@) && rm -f $(BUILD)/gen/flags-* && touch $@
$(LIB_OBJ) $(CLI_OBJ) $(TEST_OBJ) $(GEN_OBJ) $(TOOL_OBJ): $(FLAGS_STAMP)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS_BASE) -MMD -MP -c $< -o $@

# The directory is a prerequisite so that adding or removing a kernel regenerates.
$(GEN_WGSL): $(WGSL_SRC) $(wildcard src/backend/webgpu/kernels/*.wgsli) src/backend/webgpu/kernels scripts/embed-wgsl.sh
	@scripts/embed-wgsl.sh $@ $(WGSL_SRC)

$(GEN_DATA): $(DATA_SRC) kernels profiles src/backend/webgpu/kernels scripts/embed-data.sh
	@scripts/embed-data.sh $@ $(DATA_SRC)

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS_BASE) -MMD -MP -c $< -o $@

# The one place wisp takes Dawn and the default model from (src/util/paths.h)
# is compiled into paths.o: this tree's absolute path for $(BUILD)/wisp, and
# PREFIX for the copies `make install` links in $(INST). The stamp's name
# carries the tree's path, so a moved tree recompiles paths.o.
ROOT_ABS    := $(abspath .)
PREFIX_ABS   = $(abspath $(PREFIX))
INST        := $(BUILD)/install
ROOT_STAMP  := $(BUILD)/gen/root-$(shell printf '%s' '$(ROOT_ABS)' | sha256sum | cut -c1-16)
PATHS_SRC   := src/util/paths.c
$(ROOT_STAMP):
	@mkdir -p $(dir $@) && rm -f $(BUILD)/gen/root-* && touch $@
$(BUILD)/obj/src/util/paths.o: $(ROOT_STAMP)
$(BUILD)/obj/src/util/paths.o: CFLAGS_BASE += -DWISP_ROOT='"$(ROOT_ABS)"'
# Rebuilt on every install (PREFIX may differ from the last one).
.PHONY: FORCE
$(INST)/paths.o: $(PATHS_SRC) FORCE
	@mkdir -p $(dir $@)
	@$(CC) $(CFLAGS_BASE) -DWISP_ROOT='"$(PREFIX_ABS)"' -c $< -o $@


# The shared library exports only include/wisp.h's functions (the version
# script lists them) under the soname libwisp.so.MAJOR (0), MAJOR from
# WISP_VERSION in wisp.h: it changes when the API or an option struct changes
# incompatibly (docs/api.md, "ABI").
LIB_MAP := src/api/libwisp.map
LIB_MAJOR := $(shell sed -n 's/^\#define WISP_VERSION "\([0-9]*\)\..*/\1/p' include/wisp.h)
$(BUILD)/libwisp.so: $(LIB_OBJ) $(GEN_OBJ) $(LIB_MAP)
$(INST)/libwisp.so: $(filter-out $(BUILD)/obj/src/util/paths.o,$(LIB_OBJ)) $(GEN_OBJ) $(INST)/paths.o $(LIB_MAP)
$(BUILD)/libwisp.so $(INST)/libwisp.so:
	@echo "LD $@"
	@$(CC) $(CFLAGS_BASE) -shared -Wl,-soname,libwisp.so.$(LIB_MAJOR) -Wl,--version-script,$(LIB_MAP) -o $@ $(filter %.o,$^) $(LDLIBS)

lib: $(BUILD)/libwisp.a $(BUILD)/libwisp.so

install: $(INST)/wisp $(INST)/libwisp.a $(INST)/libwisp.so
	@WISP_LIBS_PRIVATE="$(LDLIBS)" scripts/install.sh "$(PREFIX)" "$(INST)"

$(BUILD)/libwisp.a: $(LIB_OBJ) $(GEN_OBJ)
$(INST)/libwisp.a: $(filter-out $(BUILD)/obj/src/util/paths.o,$(LIB_OBJ)) $(GEN_OBJ) $(INST)/paths.o
$(BUILD)/libwisp.a $(INST)/libwisp.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/wisp: $(CLI_OBJ) $(BUILD)/libwisp.a
$(INST)/wisp: $(CLI_OBJ) $(INST)/libwisp.a
$(BUILD)/wisp $(INST)/wisp:
	@echo "LD $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $^ $(LDLIBS)

# Device probe (tools/phase_probe.c): what one persistent-decode phase costs.
$(BUILD)/phase_probe: $(BUILD)/obj/tools/phase_probe.o $(BUILD)/obj/tools/probe_open.o $(BUILD)/libwisp.a
	@echo "LD $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $^ $(LDLIBS)

# Device probe (tools/stream_probe.c): how fast one dispatch reads a product's bytes.
$(BUILD)/stream_probe: $(BUILD)/obj/tools/stream_probe.o $(BUILD)/obj/tools/probe_open.o $(BUILD)/libwisp.a
	@echo "LD $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $^ $(LDLIBS)

# Probe (tools/seq_probe.c): S sequences a decode step against one at a time.
$(BUILD)/seq_probe: $(BUILD)/obj/tools/seq_probe.o $(BUILD)/libwisp.a
	@echo "LD $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $^ $(LDLIBS)

# Device probe (tools/prod_probe.c): GFLOP/s of each prefill product kernel against the peaks.
$(BUILD)/prod_probe: $(BUILD)/obj/tools/prod_probe.o $(BUILD)/libwisp.a
	@echo "LD $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $^ $(LDLIBS)

# Probe (tools/sched_probe.c): the serving scheduler without HTTP (C streams, multi-turn reuse).
$(BUILD)/sched_probe: $(BUILD)/obj/tools/sched_probe.o $(BUILD)/libwisp.a
	@echo "LD $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $^ $(LDLIBS)

$(BUILD)/wisp_tests: $(TEST_OBJ) $(BUILD)/libwisp.a
	@echo "LD $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $^ $(LDLIBS)

# The suite runs twice: an optimised build, then a sanitized one in build-san.
test: deps
	@scripts/test.sh

test-plain: all
	$(BUILD)/wisp_tests

run: deps all
	@scripts/run-default.sh

bench: deps all
	@scripts/run-default.sh --bench-only

# Fuzzing (docs/fuzzing.md): libFuzzer harnesses for every reader, built with
# clang + ASan + UBSan against a library compiled with fuzzer coverage; each
# runs FUZZ_SECONDS (default 60) from a copy of its committed seed corpus.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_NAMES   := gguf gguf_vocab safetensors manifest tokenizer_json tokenizer_config generation_config chat_template cli_options request
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)

# The harnesses link only the readers and what they call, so only those
# files are compiled for fuzzing (a fifth of the library; the WebGPU and CPU
# backends are not): a harness that comes to need another file fails to
# link, naming the missing function, and the file is added here.
FUZZ_LIB_SRC := src/cli/opts.c src/format/artifact.c src/format/artifact_open.c src/format/gguf.c src/format/gguf_arch.c \
                src/format/gguf_artifact.c src/format/gguf_import.c src/format/gguf_spm.c src/format/gguf_text_index.c src/format/json_text.c src/format/qblocks.c src/format/quant.c src/format/safetensors.c src/format/tensor.c src/format/weight_source.c \
                src/format/writer.c src/server/request.c src/engine/tuning_keys.c src/backend/tuning.c \
                src/server/response.c src/tokenizer/bpe.c \
                src/tokenizer/chat.c src/tokenizer/chat_template.c src/tokenizer/jinja_builtin.c \
                src/tokenizer/jinja_eval.c src/tokenizer/jinja_lex.c src/tokenizer/jinja_parse.c src/tokenizer/jinja_value.c \
                src/tokenizer/tok_settings.c src/tokenizer/tokenizer.c src/util/builtin.c \
                src/util/err.c src/util/file.c src/util/memfile.c src/util/sha256.c src/util/target.c
FUZZ_LIB_OBJ  = $(FUZZ_LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/builtin_data.o

$(BUILD)/libwisp-fuzz.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

fuzz-build:
	@scripts/fuzz-deps.sh
	@$(MAKE) -s BUILD=$(FUZZ_BUILD) CC=clang OPT=-O1 "SAN=-fsanitize=fuzzer-no-link $(FUZZ_SAN)" $(FUZZ_BUILD)/libwisp-fuzz.a
	@for n in $(FUZZ_NAMES); do \
	  echo "CC tests/fuzz/fuzz_$$n.c"; \
	  clang $(CFLAGS_BASE) -O1 -fsanitize=fuzzer $(FUZZ_SAN) tests/fuzz/fuzz_$$n.c $(FUZZ_BUILD)/libwisp-fuzz.a \
	    -o $(FUZZ_BUILD)/fuzz_$$n $(LDLIBS) || exit 1; \
	done

fuzz: fuzz-build
	@for n in $(FUZZ_NAMES); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$n && cp -n tests/fuzz/corpus/$$n/* $(FUZZ_BUILD)/corpus/$$n/ 2>/dev/null; \
	  echo "== fuzz_$$n ($(FUZZ_SECONDS) s) =="; \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
	  $(FUZZ_BUILD)/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -max_len=131072 -rss_limit_mb=4096 \
	    $$([ $$n = cli_options ] && echo -close_fd_mask=2) \
	    -artifact_prefix=$(FUZZ_BUILD)/crash-$$n- $(FUZZ_BUILD)/corpus/$$n 2>&1 | tail -n 3 || exit 1; \
	done

# `make test`'s smoke run: each harness replays its committed seeds and then
# makes FUZZ_RUNS more inputs (fixed seed, a count rather than a time, so a
# loaded machine runs the same inputs); new inputs go to a scratch directory.
FUZZ_RUNS ?= 2000
fuzz-smoke: fuzz-build
	@for n in $(FUZZ_NAMES); do \
	  rm -rf $(FUZZ_BUILD)/smoke/$$n && mkdir -p $(FUZZ_BUILD)/smoke/$$n; \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
	  $(FUZZ_BUILD)/fuzz_$$n -runs=$(FUZZ_RUNS) -seed=1 -max_len=131072 -rss_limit_mb=4096 \
	    -artifact_prefix=$(FUZZ_BUILD)/crash-$$n- $(FUZZ_BUILD)/smoke/$$n tests/fuzz/corpus/$$n \
	    >$(FUZZ_BUILD)/smoke/$$n.log 2>&1 \
	    || { tail -n 30 $(FUZZ_BUILD)/smoke/$$n.log; echo "fuzz_$$n: FAILED"; exit 1; }; \
	  echo "fuzz_$$n: $$(grep -o 'Done [0-9]* runs' $(FUZZ_BUILD)/smoke/$$n.log) clean"; \
	done

clean:
	rm -rf build build-san build-fuzz

-include $(DEPS)

# Device probe (tools/grid_probe.c): grid barriers inside one dispatch.
$(BUILD)/grid_probe: $(BUILD)/obj/tools/grid_probe.o $(BUILD)/obj/tools/probe_open.o $(BUILD)/libwisp.a
	@echo "LD $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $^ $(LDLIBS)

# ---- WebAssembly (docs/browser.md) ------------------------------------------
# `make wasm` builds build/wasm/wisp.wasm (the CLI for wasm32-wasi, run in the
# page by web/) from the same sources: every library file and the CLI, less
# what the browser supplies itself. The Dawn loader is replaced by
# web/wasm/wgpu_web.c (webgpu.h over imports that web/wgpu.js implements on
# navigator.gpu), libcrypto's sha256 by web/wasm/sha256_web.c (WebCrypto) and
# the HTTP server by web/wasm/serve_web.c (one line saying it is not there).
# Toolchain and libraries: scripts/wasm-deps.sh (Debian's clang-19 and
# wasi-libc; cJSON, utf8proc, PCRE2 from their Debian sources).
WASM_DIR   ?= build/wasm
WASM_CC    ?= clang-19
WASM_DEPS  := $(WASM_DIR)/deps
WASM_CFLAGS = --target=wasm32-wasi --sysroot=/usr -std=c11 -Wall -Wextra -Werror -O2 -D_GNU_SOURCE \
              -D_WASI_EMULATED_MMAN -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS \
              -Iinclude -Isrc -I$(WASM_DEPS)/include -I$(WASM_DEPS)/include/cjson -fno-strict-aliasing \
              -msimd128 -D_WASI_EMULATED_GETPID -include web/wasm/posix_web.h -Wno-unused-but-set-variable -DWISP_ROOT='"/wisp"'
WASM_LDFLAGS = -Wl,--error-limit=0 -Wl,-z,stack-size=8388608 -Wl,--max-memory=4294967296 \
               -L$(WASM_DEPS)/lib -lcjson -lpcre2-8 -lutf8proc -lmd \
               -lwasi-emulated-mman -lwasi-emulated-signal -lwasi-emulated-process-clocks -lwasi-emulated-getpid -lm
WASM_SRC   := $(filter-out src/server/% src/util/sha256.c src/backend/webgpu/wgpu_loader.c src/format/weight_source.c,$(LIB_SRC)) \
              $(CLI_SRC) $(sort $(wildcard web/wasm/*.c))
WASM_OBJ   := $(WASM_SRC:%.c=$(WASM_DIR)/obj/%.o) $(WASM_DIR)/obj/gen/wgsl_kernels.o $(WASM_DIR)/obj/gen/builtin_data.o

.PHONY: wasm wasm-deps
WEB_FILES  := $(wildcard web/*.html web/*.js)
wasm: wasm-deps $(GEN_WGSL) $(GEN_DATA)
	@$(MAKE) --no-print-directory $(WASM_DIR)/wisp.wasm $(WEB_FILES:web/%=$(WASM_DIR)/%)

# The page and its glue sit beside wisp.wasm: build/wasm/ is what a web
# server serves (docs/browser.md).
$(WASM_DIR)/%: web/%
	@mkdir -p $(dir $@)
	@cp $< $@

wasm-deps:
	@scripts/wasm-deps.sh

$(WASM_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "WASM CC $<"
	@$(WASM_CC) $(WASM_CFLAGS) -MMD -MP -c $< -o $@

$(WASM_DIR)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	@echo "WASM CC $<"
	@$(WASM_CC) $(WASM_CFLAGS) -MMD -MP -c $< -o $@

$(WASM_DIR)/wisp.wasm: $(WASM_OBJ)
	@echo "WASM LD $@"
	@$(WASM_CC) $(WASM_CFLAGS) -o $@ $^ $(WASM_LDFLAGS)

-include $(WASM_OBJ:.o=.d)
