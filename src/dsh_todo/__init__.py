"""dsh-todo: DeepSeek Harness todo_write in Python."""
