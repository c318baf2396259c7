# hostile: positive control: subprocess of python itself, with pipes, and a shell pipeline
# expect: exit=0 stdout="OK 42 hi\n"
import subprocess, sys
a = subprocess.run([sys.executable, "-c", "print(6*7)"], capture_output=True, text=True).stdout.strip()
b = subprocess.run("echo hi | cat", shell=True, capture_output=True, text=True).stdout.strip()
print("OK", a, b)
