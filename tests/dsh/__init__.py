"""The real DeepSeek Harness 0.2.1 (``dsh``) against dsh-todo, both ways, through ``todo_write`` turns."""
