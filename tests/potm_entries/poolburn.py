#!/usr/bin/env python3
# Hostile: burns CPU in a multiprocessing pool (worker processes, POSIX semaphores in
# /dev/shm), and the first process only waits for results that never come.
import multiprocessing


def burn(_: int) -> int:
    while True:
        pass


with multiprocessing.Pool(2) as pool:
    pool.map(burn, [0, 1])
print("AAAAA")
