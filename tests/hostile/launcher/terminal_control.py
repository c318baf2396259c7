# hostile: terminal control sequences (OSC 52 clipboard write, title, CSI clear, DECSET, bell, backspace over text)
# expect: exit=0 raw_lacks="\x1b" raw_lacks="\x07" stdout_contains="\x1b]52;c;cHduZWQ=\x07"
import sys
sys.stdout.write("\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\x1b[2J\x1b[?1049h\r\b\b\bOK\x9b31m\n")
sys.stderr.write("\x1b[31mred\x1b[0m\x07\n")
