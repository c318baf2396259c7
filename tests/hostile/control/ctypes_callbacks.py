# hostile: positive control: ctypes calls into libc with a Python callback (qsort)
# expect: exit=0 stdout="OK [1, 2, 3, 5, 8]\n"
import ctypes
libc = ctypes.CDLL(None)
arr = (ctypes.c_int * 5)(5, 3, 8, 1, 2)
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
libc.qsort(arr, 5, ctypes.sizeof(ctypes.c_int), CMP(lambda a, b: a[0] - b[0]))
print("OK", list(arr))
