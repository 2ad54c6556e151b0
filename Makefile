# Makefile: a thin wrapper over CMake. `make` builds, `make example` runs the bundled example,
# `make check` runs the whole test suite (a -Werror build, an ASan+UBSan build of everything
# but the agent with allocation-failure injection, and a libFuzzer build running each fuzz
# target for a bounded time).
JOBS ?= $(shell nproc)
BUILD ?= build

.PHONY: all example check check-werror check-asan check-fuzz format format-check install clean

all:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

example: all
	cc -O2 -g examples/leaky.c -o $(BUILD)/leaky    # as most code is built: no frame pointers
	$(BUILD)/memscope run -o out/example.db -- $(BUILD)/leaky
	@echo "--- the same run, analysed (memscope analyze leaks):"
	$(BUILD)/memscope analyze leaks out/example.db --top 3
	@echo "--- its full database, one row per event as msMemScope's memscope_dump:"
	$(BUILD)/memscope export out/example.db --format=db -o out/example-full.db
	sqlite3 -header -column out/example-full.db \
	  "SELECT \"Event\", count(*) AS events, sum(json_extract(\"Attr\", '$$.size')) AS bytes FROM memscope_dump GROUP BY 1"
	@echo "--- the viewer's page as one file (memscope report; memscope view serves it live):"
	$(BUILD)/memscope report out/example.db -o out/example.html
	@echo "open out/example.html in a browser"

check: format-check check-werror check-asan check-fuzz

# The C sources in the format .clang-format describes: format-check fails on any difference
# (and says which files); format rewrites them.
FORMAT_FILES = $(shell git ls-files 'src/*.c' 'src/*.h' 'include/*.h' 'python/memscope/*.c' 2>/dev/null)
format:
	@clang-format --style=file -i $(FORMAT_FILES)
format-check:
	@echo "format-check: $(words $(FORMAT_FILES)) files against .clang-format"
	@clang-format --style=file --dry-run --Werror $(FORMAT_FILES)

check-werror:
	cmake -S . -B build-werror -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMSCOPE_WERROR=ON >/dev/null
	cmake --build build-werror -j$(JOBS)
	cd build-werror && ctest --output-on-failure -j$(JOBS)

check-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMEMSCOPE_SANITIZE=ON -DMEMSCOPE_WERROR=ON \
	  -DMEMSCOPE_FAIL_ALLOC=ON >/dev/null
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ctest --output-on-failure -j$(JOBS) -LE no-asan

check-fuzz:
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMSCOPE_FUZZ=ON >/dev/null
	cmake --build build-fuzz -j$(JOBS)
	cd build-fuzz && ctest --output-on-failure -R fuzz

install: all
	cmake --install $(BUILD)

clean:
	rm -rf build build-werror build-asan build-fuzz out
