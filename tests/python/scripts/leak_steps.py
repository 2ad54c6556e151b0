"""A training-like loop with a known per-step leak: each step keeps one 100_000-byte bytearray
(the line marked LEAK) and frees a 200_000-byte temporary. 10 steps, memscope.step() after each."""
import memscope

kept = []


def train_step(i):
    tmp = bytearray(200_000)
    kept.append(bytearray(100_000))  # LEAK
    del tmp


def main():
    for i in range(10):
        train_step(i)
        memscope.step()


main()
