# Makefile: a thin wrapper over CMake. `make` builds, `make example` runs the bundled example,
# `make check` runs the whole test suite (a -Werror build, an ASan+UBSan build of everything
# but the agent, and a libFuzzer build running each fuzz target for a bounded time).
JOBS ?= $(shell nproc)
BUILD ?= build

.PHONY: all example check check-werror check-asan check-fuzz install clean

all:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

example: all
	cc -O1 -g -fno-omit-frame-pointer examples/leaky.c -o $(BUILD)/leaky
	$(BUILD)/memscope run -o out/example.db -- $(BUILD)/leaky
	@echo "--- the leak, straight from the database (sqlite3 out/example.db):"
	sqlite3 -header -column out/example.db \
	  "SELECT count(*) AS blocks, sum(b.size) AS bytes, substr(s.c_text, 1, instr(s.c_text || char(10), char(10)) - 1) AS call_site \
	   FROM blocks b JOIN stacks s ON s.id = b.stack_id WHERE b.free_ns IS NULL \
	   GROUP BY b.stack_id ORDER BY bytes DESC LIMIT 3"

check: check-werror check-asan check-fuzz

check-werror:
	cmake -S . -B build-werror -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMSCOPE_WERROR=ON >/dev/null
	cmake --build build-werror -j$(JOBS)
	cd build-werror && ctest --output-on-failure -j$(JOBS)

check-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMEMSCOPE_SANITIZE=ON -DMEMSCOPE_WERROR=ON >/dev/null
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
